// Spare TokenBatch storage for one cluster: batches emptied by a queue, a dispatch or a
// delivery are cleared and kept here, and new outgoing batches come from here, so that steady
// serving moves rows without allocating (the sim spends most of its time doing exactly that).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>
#include <vector>

#include "engine/runtime/token_batch.h"

namespace sy {

class BatchRecycler {
 public:
  // An empty batch, with the capacity some earlier batch left behind when there is one.
  TokenBatch take() {
    if (spare_.empty()) return TokenBatch{};
    TokenBatch b = std::move(spare_.back());
    spare_.pop_back();
    return b;
  }
  // Appends an empty batch to `to`, moved straight from the spares (one move, not two).
  TokenBatch& take_into(std::vector<TokenBatch>& to) {
    if (spare_.empty()) return to.emplace_back();
    to.push_back(std::move(spare_.back()));
    spare_.pop_back();
    return to.back();
  }
  // Keeps b's storage for a later take(); beyond a bound it is simply freed.
  void give(TokenBatch&& b) {
    if (spare_.size() >= kMaxSpare) return;
    reset(b);
    spare_.push_back(std::move(b));
  }
  std::size_t spare() const { return spare_.size(); }

  // The lists of batches a shipment carries come back whole: a delivered shipment's list keeps
  // its batches, emptied in place, so that the next dispatch fills them where they are instead
  // of moving each batch out of the list and into it again (when a TokenBatch was seven vectors
  // and a handle, moving one in and out of the spares cost more than the rows of most batches).
  // take_list(n, to) gives the empty list `to` up to n such empty batches (n: how many the
  // caller expects to fill), or leaves it empty; lists are kept by their length so that one
  // usually fits. Lists are swapped in and out of slots that stay, so that neither side
  // destroys an emptied list (out of line): every shipment takes one and gives one.
  void take_list(std::size_t n, std::vector<TokenBatch>& to) {
    const std::size_t k = std::min(n, kListLengths - 1);
    if (count_[k] == 0) return;
    spare_lists_[k][--count_[k]].swap(to);
  }
  // Keeps l's batches, emptied in place; l is left an empty list.
  void give_list(std::vector<TokenBatch>& l) {
    const std::size_t k = std::min(l.size(), kListLengths - 1);
    auto& lists = spare_lists_[k];
    if (count_[k] >= kMaxSpare) return;
    for (TokenBatch& b : l) reset(b);
    if (count_[k] == lists.size()) lists.emplace_back();
    lists[count_[k]++].swap(l);
  }
  // Hands the batches of `l` from position `used` on to the spares and drops them from `l`.
  void trim_list(std::vector<TokenBatch>& l, std::size_t used) {
    for (std::size_t i = used; i < l.size(); ++i) give(std::move(l[i]));
    l.resize(used);
  }

 private:
  static void reset(TokenBatch& b) {
    b.clear();
    b.layer = {};
    b.group = -1;
    b.oldest_ns = 0;
  }
  static constexpr std::size_t kMaxSpare = 4096;
  static constexpr std::size_t kListLengths = 8;  // lists of 7 batches or more share the last bucket
  std::vector<TokenBatch> spare_;
  std::array<std::vector<std::vector<TokenBatch>>, kListLengths> spare_lists_;  // [0, count_) hold lists
  std::array<std::size_t, kListLengths> count_{};
};

}  // namespace sy
