// Automatic prefix caching for one attention rank's paged KV cache (vLLM's, at page
// granularity): the pages of a prompt whose KV is written are indexed by their content, the
// tokens of the page and of every page before it, so a later request with the same leading
// tokens shares those pages instead of computing them again. A page is indexed only once it is
// full of prompt tokens and every layer has written it (the caller says when: after the
// request's first token). Content is compared exactly, never by hash alone. Unreferenced
// indexed pages stay until the allocator needs them back (KvBlockAllocator evicts them, least
// recently released first, and this index forgets them).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/kv/kv_block_allocator.h"

namespace sy {

class PrefixCache {
 public:
  explicit PrefixCache(KvBlockAllocator& allocator);
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The pages holding the longest indexed run of `tokens`' leading full pages, at most
  // `max_pages` of them. Nothing is retained.
  std::vector<std::int32_t> match(std::span<const std::int32_t> tokens, std::int32_t max_pages) const;
  // Indexes the full pages of `tokens` that `block_table` holds (page k: tokens
  // [k·page_size, (k+1)·page_size)), whose KV is written. A page whose content another page
  // already holds stays private to its sequence.
  void insert(std::span<const std::int32_t> tokens, std::span<const std::int32_t> block_table);
  std::int64_t indexed_pages() const { return static_cast<std::int64_t>(by_page_.size()); }

 private:
  // A page's content: the entry of the page before it (0: none) and its own tokens.
  struct Key {
    std::uint64_t parent = 0;
    std::vector<std::int32_t> tokens;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  struct Entry {
    std::int32_t page;
    std::uint64_t id;  // unique, never reused: a child's key names it, not the page id
  };
  void forget(std::int32_t page);

  KvBlockAllocator& allocator_;
  std::unordered_map<Key, Entry, KeyHash> entries_;
  std::unordered_map<std::int32_t, Key> by_page_;  // indexed page -> its key
  std::uint64_t next_id_ = 1;
};

}  // namespace sy
