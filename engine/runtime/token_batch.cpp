#include "engine/runtime/token_batch.h"

#include <cassert>

namespace sy {

void TokenBatch::clear() {
  request.clear();
  position.clear();
  rank.clear();
  token.clear();
  slot.clear();
  weight.clear();
  hidden.clear();
}

void TokenBatch::append_row(const TokenBatch& src, std::int64_t r, std::int64_t width) {
  const auto i = static_cast<std::size_t>(r);
  request.push_back(src.request[i]);
  position.push_back(src.position[i]);
  rank.push_back(src.rank[i]);
  if (!src.token.empty()) token.push_back(src.token[i]);
  if (!src.slot.empty()) {
    slot.push_back(src.slot[i]);
    weight.push_back(src.weight[i]);
  }
  if (width > 0 && !src.hidden.empty()) {
    const auto w = static_cast<std::size_t>(width);
    hidden.insert(hidden.end(), src.hidden.begin() + static_cast<std::ptrdiff_t>(i * w),
                  src.hidden.begin() + static_cast<std::ptrdiff_t>((i + 1) * w));
  }
}

namespace {
template <class T>
void append_column(std::vector<T>& dst, const std::vector<T>& src) {
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
  // Every row of a queue carries the same columns (all or none have tokens, slots, tensors).
  assert(token.empty() == src.token.empty() && slot.empty() == src.slot.empty());
  append_column(request, src.request);
  append_column(position, src.position);
  append_column(rank, src.rank);
  append_column(token, src.token);
  append_column(slot, src.slot);
  append_column(weight, src.weight);
  append_column(hidden, src.hidden);
}

}  // namespace sy
