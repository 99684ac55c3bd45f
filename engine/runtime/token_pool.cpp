#include "engine/runtime/token_pool.h"

#include <algorithm>
#include <cassert>

namespace sy {

void TokenPool::hold(TokenPacket residual, std::int32_t k, std::int64_t width, std::vector<float> shared_out) {
  Entry e;
  const std::int32_t slots = residual.rows * k;
  e.remaining = slots;
  e.width = width;
  e.slot_outputs.assign(static_cast<std::size_t>(slots * width), 0.0f);
  e.filled.assign(static_cast<std::size_t>(slots), false);
  e.shared_out = std::move(shared_out);
  const std::int64_t request = residual.request;
  const std::int32_t block = residual.layer.block;
  e.residual = std::move(residual);
  [[maybe_unused]] const bool inserted = entries_[request].emplace(block, std::move(e)).second;
  assert(inserted && "a request has one token batch in flight per block");
}

std::optional<TokenPool::Completed> TokenPool::absorb(const TokenPacket& p) {
  auto req = entries_.find(p.request);
  assert(req != entries_.end() && "expert output for a request the pool does not hold");
  auto it = req->second.find(p.layer.block);
  assert(it != req->second.end() && "expert output for a block the pool does not hold");
  Entry& e = it->second;
  assert(static_cast<std::int32_t>(p.slots.size()) == p.rows);
  const std::size_t width = static_cast<std::size_t>(e.width);
  // The sim backend carries no tensors: rows count, no floats are copied.
  const bool has_tensors = width > 0 && !p.hidden.empty();
  for (std::int32_t r = 0; r < p.rows; ++r) {
    const auto slot = static_cast<std::size_t>(p.slots[static_cast<std::size_t>(r)]);
    assert(slot < e.filled.size() && !e.filled[slot] && "a top-k slot arrived twice");
    e.filled[slot] = true;
    if (has_tensors) {
      std::copy_n(p.hidden.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * width), width,
                  e.slot_outputs.begin() + static_cast<std::ptrdiff_t>(slot * width));
    }
    --e.remaining;
  }
  if (e.remaining > 0) return std::nullopt;
  Completed done{std::move(e.residual), std::move(e.slot_outputs), std::move(e.shared_out)};
  req->second.erase(it);
  if (req->second.empty()) entries_.erase(req);
  return done;
}

std::size_t TokenPool::size() const {
  std::size_t n = 0;
  for (const auto& [request, blocks] : entries_) n += blocks.size();
  return n;
}

}  // namespace sy
