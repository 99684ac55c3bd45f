// Token masks by matcher state (mask_cache.h).
#include "engine/structured/mask_cache.h"

#include "engine/structured/token_mask.h"

namespace sy::structured {

std::shared_ptr<const TokenMask> MaskCache::mask(const Matcher& matcher, const TokenVocabulary& vocab,
                                                 std::size_t words) {
  const std::size_t hash = matcher.state_hash();
  {
    std::lock_guard lock(mutex_);
    auto [first, last] = index_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      if (it->second->state.same_state(matcher) && it->second->mask->size() >= words) {
        lru_.splice(lru_.begin(), lru_, it->second);
        ++hits_;
        return it->second->mask;
      }
    }
    ++misses_;
  }
  // Computed without the lock: other sequences' lookups go on meanwhile (two that miss on one
  // state both compute it; the second keeps the first's entry).
  auto fresh = std::make_shared<TokenMask>();
  compute_token_mask(matcher, vocab, words, *fresh);
  std::shared_ptr<const TokenMask> out = std::move(fresh);
  std::lock_guard lock(mutex_);
  auto [first, last] = index_.equal_range(hash);
  for (auto it = first; it != last; ++it)
    if (it->second->state.same_state(matcher) && it->second->mask->size() == out->size()) return it->second->mask;
  lru_.push_front(Entry{hash, matcher, out});
  index_.emplace(hash, lru_.begin());
  bytes_ += out->size() * sizeof(std::uint32_t);
  while (bytes_ > max_bytes_ && lru_.size() > 1) {
    const Entry& victim = lru_.back();
    auto [vf, vl] = index_.equal_range(victim.hash);
    for (auto it = vf; it != vl; ++it) {
      if (it->second == std::prev(lru_.end())) {
        index_.erase(it);
        break;
      }
    }
    bytes_ -= victim.mask->size() * sizeof(std::uint32_t);
    lru_.pop_back();
  }
  return out;
}

MaskCache::Stats MaskCache::stats() const {
  std::lock_guard lock(mutex_);
  return Stats{hits_, misses_, lru_.size(), bytes_};
}

}  // namespace sy::structured
