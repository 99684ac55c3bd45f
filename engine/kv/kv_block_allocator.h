// Page accounting of one paged KV cache: which pages are free, which are referenced (and by how
// many sequences: a prefix cache shares pages), and which hold cached content nobody references
// now, reusable but evicted (least recently released first) when no page is free. How many
// pages a number of positions needs. The storage itself (host or device memory) belongs to the
// backend.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <vector>

namespace sy {

class KvBlockAllocator {
 public:
  KvBlockAllocator(std::int32_t num_pages, std::int32_t page_size);
  // Host bytes this accounting takes per page (free stack, references, state), whatever the
  // backend: what a layout's page count costs before any KV storage, checked before allocating.
  static std::int64_t bytes_per_page();

  std::int32_t page_size() const { return page_size_; }
  std::int32_t num_pages() const { return num_pages_; }
  // Pages an allocation may take: the free ones and the cached ones nobody references.
  std::int32_t free_pages() const { return static_cast<std::int32_t>(free_.size() + evictable_.size()); }
  std::int32_t evictable_pages() const { return static_cast<std::int32_t>(evictable_.size()); }
  // Pages needed to hold `positions` positions.
  std::int32_t pages_for(std::int64_t positions) const {
    return static_cast<std::int32_t>((positions + page_size_ - 1) / page_size_);
  }
  // Takes a free page, else evicts the cached page released longest ago (telling on_evict);
  // -1 when none is left. The page starts with one reference.
  std::int32_t allocate_page();
  // Drops a reference: an unreferenced page becomes free, or evictable while it is cached.
  void free_page(std::int32_t page);
  // Another reference to a page that is referenced or evictable (a prefix cache hit).
  void retain_page(std::int32_t page);
  std::int32_t references(std::int32_t page) const { return refs_[static_cast<std::size_t>(page)]; }
  std::int64_t evictions() const { return evictions_; }  // cached pages taken back since the start

  // A prefix cache marks the (referenced) pages whose content it indexes; `on_evict` hears of
  // each such page an allocation takes back, which unmarks it (the index forgets it).
  void mark_cached(std::int32_t page);
  bool cached(std::int32_t page) const { return state_[static_cast<std::size_t>(page)].cached; }
  void set_on_evict(std::function<void(std::int32_t page)> on_evict) { on_evict_ = std::move(on_evict); }

 private:
  struct PageState {
    bool cached = false;
    bool evictable = false;
    std::list<std::int32_t>::iterator at;  // in evictable_, when evictable
  };
  std::int32_t num_pages_, page_size_;
  std::vector<std::int32_t> free_;  // a stack: recently freed pages are reused first (warm)
  std::vector<std::int32_t> refs_;
  std::vector<PageState> state_;
  std::list<std::int32_t> evictable_;  // oldest release first
  std::function<void(std::int32_t)> on_evict_;
  std::int64_t evictions_ = 0;
};

}  // namespace sy
