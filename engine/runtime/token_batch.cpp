#include "engine/runtime/token_batch.h"

#include <cassert>
#include <utility>

#include "engine/runtime/activation_ops.h"

namespace sy {

void TokenBatch::swap_rows(TokenBatch& other) noexcept {
  request.swap(other.request);
  position.swap(other.position);
  rank.swap(other.rank);
  token.swap(other.token);
  slot.swap(other.slot);
  weight.swap(other.weight);
  // Two null handles (the sim's) have nothing to exchange: ten loads and stores a swap saved.
  if (!hidden.null() || !other.hidden.null()) swap(hidden, other.hidden);
}

namespace {
template <class T>
void append_column(std::vector<T>& dst, const std::vector<T>& src) {
  dst.insert(dst.end(), src.begin(), src.end());
}
template <class T>
void push_rows(std::vector<T>& dst, const std::vector<T>& src, std::size_t n) {
  const T* const from = src.data();
  for (std::size_t i = 0; i < n; ++i) dst.push_back(from[i]);
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
  // Every row of a queue carries the same columns (TokenBatch: they depend on its kind).
  assert(position.empty() == src.position.empty() && rank.empty() == src.rank.empty() &&
         token.empty() == src.token.empty() && slot.empty() == src.slot.empty());
  assert(hidden.null() == src.hidden.null());
  const std::size_t n = src.request.size();
  if (n <= 4) {
    // Most appends are a row or two (one sender's share of one expert's rows): pushed one by
    // one, which costs less than a call (and insert's memmove) per column. Column by column:
    // a row-by-row loop tested every column's presence again for each row.
    push_rows(request, src.request, n);
    if (!src.position.empty()) push_rows(position, src.position, n);
    if (!src.rank.empty()) push_rows(rank, src.rank, n);
    if (!src.token.empty()) push_rows(token, src.token, n);
    if (!src.slot.empty()) push_rows(slot, src.slot, n);
    if (!src.weight.empty()) push_rows(weight, src.weight, n);
  } else {
    append_column(request, src.request);
    append_column(position, src.position);
    append_column(rank, src.rank);
    append_column(token, src.token);
    append_column(slot, src.slot);
    append_column(weight, src.weight);
  }
  if (!hidden.null()) hidden.owner().append(hidden, std::move(src.hidden));
}

}  // namespace sy
