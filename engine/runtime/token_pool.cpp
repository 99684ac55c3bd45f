#include "engine/runtime/token_pool.h"

#include <algorithm>
#include <cassert>

namespace sy {

void TokenPool::hold(TokenBatch& residual, std::int32_t k, Activations&& shared_out, bool shared_to_come) {
  assert(!(shared_to_come && !shared_out.null()) && "the shared expert runs inside attention or apart, not both");
  const bool activations = !residual.hidden.null();
  held_.clear();
  residual.for_each_request([&](std::int64_t first, std::int64_t rows) {
    std::uint32_t at;
    if (free_.empty()) {
      at = static_cast<std::uint32_t>(entries_.size());
      entries_.emplace_back();
    } else {
      at = free_.back();
      free_.pop_back();
    }
    Entry& e = entries_[at];
    const TokenRow& f = residual.at(first);
    e.c.request = f.request;
    e.c.layer = residual.layer;
    e.c.group = residual.group;
    e.c.rank = f.rank;
    e.c.first_position = f.position;
    e.c.rows = static_cast<std::int32_t>(rows);
    e.remaining = static_cast<std::int32_t>(rows) * k;
#ifndef NDEBUG
    // Slots row·K + k, then (shared_to_come) one per row for the shared expert's output.
    e.filled.assign(static_cast<std::size_t>(e.remaining + (shared_to_come ? rows : 0)), false);
#endif
    if (shared_to_come) e.remaining += static_cast<std::int32_t>(rows);
    ++held_count_;
    TokenRow* const row = residual.row.data() + first;
    for (std::int64_t i = 0; i < rows; ++i) row[i].entry = static_cast<std::int32_t>(at);
    if (activations) held_.push_back(at);
  });
  residual.columns |= kColumnEntry;
  if (!activations) return;

  // Each request gets storage of its own (it leaves on its own), filled by one scatter of the
  // whole batch; the entries are all created by now, so the targets stay put.
  ActivationOps& ops = residual.hidden.owner();
  const std::int64_t width = residual.hidden.width();
  for (std::uint32_t at : held_) {
    Completed& c = entries_[at].c;
    c.hidden = ops.allocate(c.rows, width);
    c.slot_outputs = ops.allocate(static_cast<std::int64_t>(c.rows) * k, width);
    if (!shared_out.null() || shared_to_come) c.shared_out = ops.allocate(c.rows, width);
  }
  auto scatter_rows = [&](const Activations& src, Activations Completed::*store) {
    targets_.clear();
    for (std::uint32_t at : held_) {
      Completed& c = entries_[at].c;
      for (std::int32_t r = 0; r < c.rows; ++r) targets_.push_back({&(c.*store), r});
    }
    ops.scatter(src, targets_);
  };
  scatter_rows(residual.hidden, &Completed::hidden);
  if (!shared_out.null()) scatter_rows(shared_out, &Completed::shared_out);
}

bool TokenPool::awaits(const TokenRow& row, const LayerId& layer, std::int32_t group, std::int32_t k) const {
  if (row.entry < 0 || static_cast<std::size_t>(row.entry) >= entries_.size()) return false;
  const Entry& e = entries_[static_cast<std::size_t>(row.entry)];
  return e.remaining > 0 && e.c.request == row.request && e.c.layer == layer && e.c.group == group && row.slot >= 0 &&
         row.slot < static_cast<std::int64_t>(e.c.rows) * k;
}

void TokenPool::scatter_outputs(const TokenBatch& outputs) {
  // Before any request leaves the pool with them.
  const std::int64_t n = outputs.rows();
  targets_.clear();
  for (std::int64_t r = 0; r < n; ++r) {
    const TokenRow& row = outputs.at(r);
    targets_.push_back({&entries_[static_cast<std::uint32_t>(row.entry)].c.slot_outputs, row.slot});
  }
  targets_.front().of->owner().scatter(outputs.hidden, targets_);
}

void TokenPool::mark_filled(std::uint32_t at, const TokenRow& row) {
  assert(at < entries_.size() && entries_[at].remaining > 0 && entries_[at].c.request == row.request &&
         "an output for an entry that does not hold its request");
  Entry& e = entries_[at];
  const auto s = static_cast<std::size_t>(row.slot);
  assert(s < e.filled.size() && !e.filled[s] && "a top-k slot arrived twice");
  e.filled[s] = true;
  (void)e;
  (void)s;
}

void TokenPool::absorb_shared(const TokenBatch& outputs, const std::function<void(Completed&)>& on_done) {
  const std::int64_t n = outputs.rows();
  if (n > 0 && !outputs.hidden.null()) {
    targets_.clear();
    for (std::int64_t r = 0; r < n; ++r) {
      const TokenRow& row = outputs.at(r);
      Completed& c = entries_[static_cast<std::uint32_t>(row.entry)].c;
      targets_.push_back({&c.shared_out, row.position - c.first_position});
    }
    targets_.front().of->owner().scatter(outputs.hidden, targets_);
  }
  assert((n == 0 || outputs.has(kColumnEntry)) && "shared expert rows carry their token-pool entry");
  for (std::int64_t r = 0; r < n; ++r) {
    const TokenRow& row = outputs.at(r);
    const auto at = static_cast<std::uint32_t>(row.entry);
#ifndef NDEBUG
    assert(at < entries_.size() && entries_[at].remaining > 0 && entries_[at].c.request == row.request &&
           "a shared expert row for an entry that does not hold its request");
    Entry& e = entries_[at];
    const auto slot = static_cast<std::size_t>(e.c.rows) * (e.filled.size() / static_cast<std::size_t>(e.c.rows) - 1) +
                      static_cast<std::size_t>(row.position - e.c.first_position);
    assert(slot < e.filled.size() && !e.filled[slot] && "a shared expert row arrived twice");
    e.filled[slot] = true;
#endif
    count_in(at, on_done);
  }
}

}  // namespace sy
