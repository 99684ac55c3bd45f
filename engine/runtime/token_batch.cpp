#include "engine/runtime/token_batch.h"

#include <cassert>
#include <utility>

#include "engine/runtime/activation_ops.h"

namespace sy {

void TokenBatch::swap_rows(TokenBatch& other) noexcept {
  row.swap(other.row);
  std::swap(columns, other.columns);
  // Two null handles (the sim's) have nothing to exchange: ten loads and stores a swap saved.
  if (!hidden.null() || !other.hidden.null()) swap(hidden, other.hidden);
}

void TokenBatch::append(TokenBatch&& src) {
  if (src.empty()) return;
  if (empty()) {
    // Keep this batch's identity (layer, group, oldest) but take the rows' storage.
    row = std::move(src.row);
    columns = src.columns;
    hidden = std::move(src.hidden);
    return;
  }
  // Every row of a queue carries the same columns (TokenBatch: they depend on its kind); an
  // attention row's weight, which the wire allows and nothing reads, may differ.
  assert((columns | kColumnWeight) == (src.columns | kColumnWeight));
  assert(hidden.null() == src.hidden.null());
  const std::size_t n = src.row.size();
  if (n <= 4) {
    // Most appends are a row or two (one sender's share of one expert's rows): pushed one by
    // one, which costs less than insert's call and memmove.
    const TokenRow* const from = src.row.data();
    for (std::size_t i = 0; i < n; ++i) row.push_back(from[i]);
  } else {
    row.insert(row.end(), src.row.begin(), src.row.end());
  }
  if (!hidden.null()) hidden.owner().append(hidden, std::move(src.hidden));
}

}  // namespace sy
