#include "engine/kv/prefix_cache.h"

#include <algorithm>
#include <cassert>

namespace sy {

std::size_t PrefixCache::KeyHash::operator()(const Key& k) const {
  std::uint64_t h = k.parent * 0x9E3779B97F4A7C15ull;
  for (std::int32_t t : k.tokens) {
    h ^= static_cast<std::uint32_t>(t);
    h *= 0x100000001B3ull;
    h ^= h >> 29;
  }
  return static_cast<std::size_t>(h);
}

PrefixCache::PrefixCache(KvBlockAllocator& allocator) : allocator_(allocator) {
  allocator_.set_on_evict([this](std::int32_t page) { forget(page); });
}

std::vector<std::int32_t> PrefixCache::match(std::span<const std::int32_t> tokens, std::int32_t max_pages) const {
  std::vector<std::int32_t> pages;
  const auto page_size = static_cast<std::size_t>(allocator_.page_size());
  Key key;
  for (std::int32_t k = 0; k < max_pages && (static_cast<std::size_t>(k) + 1) * page_size <= tokens.size(); ++k) {
    key.tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(k * page_size),
                      tokens.begin() + static_cast<std::ptrdiff_t>((k + 1) * page_size));
    const auto it = entries_.find(key);
    if (it == entries_.end()) break;
    pages.push_back(it->second.page);
    key.parent = it->second.id;
  }
  return pages;
}

void PrefixCache::insert(std::span<const std::int32_t> tokens, std::span<const std::int32_t> block_table) {
  const auto page_size = static_cast<std::size_t>(allocator_.page_size());
  const std::size_t full = std::min(tokens.size() / page_size, block_table.size());
  Key key;
  for (std::size_t k = 0; k < full; ++k) {
    key.tokens.assign(tokens.begin() + static_cast<std::ptrdiff_t>(k * page_size),
                      tokens.begin() + static_cast<std::ptrdiff_t>((k + 1) * page_size));
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      const std::int32_t page = block_table[k];
      if (allocator_.cached(page)) break;  // indexed under other content: never (a page holds one prefix)
      it = entries_.emplace(key, Entry{page, next_id_++}).first;
      by_page_.emplace(page, key);
      allocator_.mark_cached(page);
    }
    // The same content in another page (indexed first): ours stays private, and the pages after
    // it are still the children of that content.
    key.parent = it->second.id;
  }
}

void PrefixCache::forget(std::int32_t page) {
  const auto it = by_page_.find(page);
  assert(it != by_page_.end() && "an evicted page the index did not hold");
  entries_.erase(it->second);
  by_page_.erase(it);
}

}  // namespace sy
