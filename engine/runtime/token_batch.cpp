#include "engine/runtime/token_batch.h"

#include <cassert>
#include <utility>

#include "engine/runtime/activation_ops.h"

namespace sy {

void TokenBatch::clear() {
  request.clear();
  position.clear();
  rank.clear();
  token.clear();
  slot.clear();
  weight.clear();
  hidden.reset();
}

void TokenBatch::swap_rows(TokenBatch& other) noexcept {
  request.swap(other.request);
  position.swap(other.position);
  rank.swap(other.rank);
  token.swap(other.token);
  slot.swap(other.slot);
  weight.swap(other.weight);
  swap(hidden, other.hidden);
}

namespace {
template <class T>
void append_column(std::vector<T>& dst, const std::vector<T>& src) {
  // Most appends are a row or two (one sender's share of one expert's rows): pushing them
  // costs less than insert's call to memmove per column.
  if (src.size() <= 4) {
    for (const T& x : src) dst.push_back(x);
    return;
  }
  dst.insert(dst.end(), src.begin(), src.end());
}
}  // namespace

void TokenBatch::append(TokenBatch&& src) {
  if (src.empty()) return;
  if (empty()) {
    // Keep this batch's identity (layer, group, oldest) but take the rows' storage.
    request = std::move(src.request);
    position = std::move(src.position);
    rank = std::move(src.rank);
    token = std::move(src.token);
    slot = std::move(src.slot);
    weight = std::move(src.weight);
    hidden = std::move(src.hidden);
    return;
  }
  // Every row of a queue carries the same columns (all or none have tokens, slots, activations).
  assert(token.empty() == src.token.empty() && slot.empty() == src.slot.empty());
  assert(hidden.null() == src.hidden.null());
  append_column(request, src.request);
  append_column(position, src.position);
  append_column(rank, src.rank);
  append_column(token, src.token);
  append_column(slot, src.slot);
  append_column(weight, src.weight);
  if (!hidden.null()) hidden.owner().append(hidden, std::move(src.hidden));
}

}  // namespace sy
