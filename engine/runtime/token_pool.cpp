#include "engine/runtime/token_pool.h"

#include <cassert>

namespace sy {

void TokenPool::hold(TokenBatch&& residual, std::int32_t k, Activations&& shared_out) {
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
    const auto f = static_cast<std::size_t>(first);
    e.c.request = residual.request[f];
    e.c.layer = residual.layer;
    e.c.group = residual.group;
    e.c.rank = residual.rank[f];
    e.c.first_position = residual.position[f];
    e.c.rows = static_cast<std::int32_t>(rows);
    e.remaining = static_cast<std::int32_t>(rows) * k;
#ifndef NDEBUG
    e.filled.assign(static_cast<std::size_t>(e.remaining), false);
#endif
    [[maybe_unused]] const bool inserted = index_.emplace(e.c.request, at).second;
    assert(inserted && "a request has one token batch in flight");
    if (activations) held_.push_back(at);
  });
  if (!activations) return;

  // Each request gets storage of its own (it leaves on its own), filled by one scatter of the
  // whole batch; the entries are all created by now, so the targets stay put.
  ActivationOps& ops = residual.hidden.owner();
  const std::int64_t width = residual.hidden.width();
  for (std::uint32_t at : held_) {
    Completed& c = entries_[at].c;
    c.hidden = ops.allocate(c.rows, width);
    c.slot_outputs = ops.allocate(static_cast<std::int64_t>(c.rows) * k, width);
    if (!shared_out.null()) c.shared_out = ops.allocate(c.rows, width);
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

void TokenPool::absorb(const TokenBatch& outputs, std::vector<Completed>& done) {
  const std::int64_t n = outputs.rows();
  if (n > 0 && !outputs.hidden.null()) {
    // Every output row into its request's slot storage, in one scatter, before any request
    // leaves the pool with it.
    targets_.clear();
    for (std::int64_t r = 0; r < n; ++r) {
      const auto i = static_cast<std::size_t>(r);
      const auto it = index_.find(outputs.request[i]);
      assert(it != index_.end() && "expert output for a request the pool does not hold");
      targets_.push_back({&entries_[it->second].c.slot_outputs, outputs.slot[i]});
    }
    targets_.front().of->owner().scatter(outputs.hidden, targets_);
  }
  for (std::int64_t r = 0; r < n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    const auto it = index_.find(outputs.request[i]);
    assert(it != index_.end() && "expert output for a request the pool does not hold");
    Entry& e = entries_[it->second];
#ifndef NDEBUG
    const auto slot = static_cast<std::size_t>(outputs.slot[i]);
    assert(slot < e.filled.size() && !e.filled[slot] && "a top-k slot arrived twice");
    e.filled[slot] = true;
#endif
    if (--e.remaining > 0) continue;
    const std::uint32_t at = it->second;
    index_.erase(it);
    // Moved-from handles are null, and hold() sets every other field when it reuses the entry.
    done.push_back(std::move(e.c));
    free_.push_back(at);
  }
}

}  // namespace sy
