#include "engine/runtime/token_pool.h"

#include <algorithm>
#include <cassert>

namespace sy {

void TokenPool::hold(TokenBatch&& residual, std::int32_t k, std::int64_t width, std::vector<float>&& shared_out) {
  const bool tensors = width > 0 && !residual.hidden.empty();
  const auto w = static_cast<std::size_t>(width);
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
    e.width = width;
    if (tensors) {
      const auto n = static_cast<std::size_t>(rows);
      e.c.hidden.assign(residual.hidden.begin() + static_cast<std::ptrdiff_t>(f * w),
                        residual.hidden.begin() + static_cast<std::ptrdiff_t>((f + n) * w));
      e.c.slot_outputs.assign(n * static_cast<std::size_t>(k) * w, 0.0f);
      if (!shared_out.empty())
        e.c.shared_out.assign(shared_out.begin() + static_cast<std::ptrdiff_t>(f * w),
                              shared_out.begin() + static_cast<std::ptrdiff_t>((f + n) * w));
    }
#ifndef NDEBUG
    e.filled.assign(static_cast<std::size_t>(e.remaining), false);
#endif
    [[maybe_unused]] const bool inserted = index_.emplace(e.c.request, at).second;
    assert(inserted && "a request has one token batch in flight");
  });
}

void TokenPool::absorb(const TokenBatch& outputs, std::vector<Completed>& done) {
  const std::int64_t n = outputs.rows();
  const bool tensors = !outputs.hidden.empty();
  for (std::int64_t r = 0; r < n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    const auto it = index_.find(outputs.request[i]);
    assert(it != index_.end() && "expert output for a request the pool does not hold");
    Entry& e = entries_[it->second];
    const auto slot = static_cast<std::size_t>(outputs.slot[i]);
#ifndef NDEBUG
    assert(slot < e.filled.size() && !e.filled[slot] && "a top-k slot arrived twice");
    e.filled[slot] = true;
#endif
    if (tensors && e.width > 0) {
      const auto w = static_cast<std::size_t>(e.width);
      std::copy_n(outputs.hidden.begin() + static_cast<std::ptrdiff_t>(i * w), w,
                  e.c.slot_outputs.begin() + static_cast<std::ptrdiff_t>(slot * w));
    }
    if (--e.remaining > 0) continue;
    const std::uint32_t at = it->second;
    index_.erase(it);
    done.push_back(std::move(e.c));
    e.c = Completed{};
    free_.push_back(at);
  }
}

}  // namespace sy
