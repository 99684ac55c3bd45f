// The token masks already computed for one grammar over one vocabulary, by matcher state: the
// sequences of a JSON schema pass through the same states again and again (every position inside
// an unbounded string is one state, every object of an array the same keys), and a mask over a
// 150k vocabulary costs up to milliseconds of the loop thread (TokenMaskCost in test_structured).
// Shared by every guide of the grammar (GuideSpec::masks), from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/structured/matcher.h"
#include "engine/structured/token_vocabulary.h"

namespace sy::structured {

using TokenMask = std::vector<std::uint32_t>;

class MaskCache {
 public:
  // At most about this many bytes of masks (least recently used go first; one mask is always kept).
  static constexpr std::size_t kDefaultBytes = 8u << 20;
  explicit MaskCache(std::size_t max_bytes = kDefaultBytes) : max_bytes_(max_bytes) {}

  // The mask of the tokens allowed after `matcher` (compute_token_mask's, `words` words): the
  // cached one of an equal state, else computed now (outside the lock) and kept.
  std::shared_ptr<const TokenMask> mask(const Matcher& matcher, const TokenVocabulary& vocab, std::size_t words);

  struct Stats {
    std::int64_t hits = 0;
    std::int64_t misses = 0;
    std::size_t entries = 0;
    std::size_t bytes = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    std::size_t hash;
    Matcher state;
    std::shared_ptr<const TokenMask> mask;
  };
  using Lru = std::list<Entry>;  // most recently used first

  std::size_t max_bytes_;
  mutable std::mutex mutex_;
  Lru lru_;
  std::unordered_multimap<std::size_t, Lru::iterator> index_;
  std::size_t bytes_ = 0;
  std::int64_t hits_ = 0, misses_ = 0;
};

}  // namespace sy::structured
