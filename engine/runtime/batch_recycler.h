// Spare TokenBatch storage for one cluster: batches emptied by a queue, a dispatch or a
// delivery are cleared and kept here, and new outgoing batches come from here, so that steady
// serving moves rows without allocating (the sim spends most of its time doing exactly that).
#pragma once

#include <cstddef>
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
    b.clear();
    b.layer = {};
    b.group = -1;
    b.oldest_ns = 0;
    spare_.push_back(std::move(b));
  }
  std::size_t spare() const { return spare_.size(); }

  // The same for the lists of batches a shipment carries.
  std::vector<TokenBatch> take_list() {
    if (spare_lists_.empty()) return {};
    std::vector<TokenBatch> l = std::move(spare_lists_.back());
    spare_lists_.pop_back();
    return l;
  }
  void give_list(std::vector<TokenBatch>&& l) {
    if (spare_lists_.size() >= kMaxSpare) return;
    l.clear();
    spare_lists_.push_back(std::move(l));
  }

 private:
  static constexpr std::size_t kMaxSpare = 4096;
  std::vector<TokenBatch> spare_;
  std::vector<std::vector<TokenBatch>> spare_lists_;
};

}  // namespace sy
