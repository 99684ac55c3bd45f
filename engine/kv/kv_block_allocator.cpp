#include "engine/kv/kv_block_allocator.h"

#include <cassert>

namespace sy {

std::int64_t KvBlockAllocator::bytes_per_page() {
  return static_cast<std::int64_t>(sizeof(std::int32_t) * 2 + sizeof(PageState));
}

KvBlockAllocator::KvBlockAllocator(std::int32_t num_pages, std::int32_t page_size)
    : num_pages_(num_pages),
      page_size_(page_size),
      refs_(static_cast<std::size_t>(num_pages), 0),
      state_(static_cast<std::size_t>(num_pages)) {
  assert(num_pages >= 0 && page_size > 0);
  free_.reserve(static_cast<std::size_t>(num_pages));
  for (std::int32_t p = num_pages - 1; p >= 0; --p) free_.push_back(p);
}

std::int32_t KvBlockAllocator::allocate_page() {
  std::int32_t page = -1;
  if (!free_.empty()) {
    page = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    page = evictable_.front();
    evictable_.pop_front();
    PageState& s = state_[static_cast<std::size_t>(page)];
    s.evictable = false;
    s.cached = false;
    ++evictions_;
    if (on_evict_) on_evict_(page);
  } else {
    return -1;
  }
  refs_[static_cast<std::size_t>(page)] = 1;
  return page;
}

void KvBlockAllocator::free_page(std::int32_t page) {
  assert(page >= 0 && page < num_pages_);
  std::int32_t& refs = refs_[static_cast<std::size_t>(page)];
  assert(refs > 0 && "page freed more often than referenced");
  if (--refs > 0) return;
  PageState& s = state_[static_cast<std::size_t>(page)];
  if (s.cached) {
    s.evictable = true;
    s.at = evictable_.insert(evictable_.end(), page);
  } else {
    free_.push_back(page);
  }
}

void KvBlockAllocator::retain_page(std::int32_t page) {
  assert(page >= 0 && page < num_pages_);
  PageState& s = state_[static_cast<std::size_t>(page)];
  if (s.evictable) {
    evictable_.erase(s.at);
    s.evictable = false;
  }
  assert((refs_[static_cast<std::size_t>(page)] > 0 || s.cached) && "retaining a free page");
  ++refs_[static_cast<std::size_t>(page)];
}

void KvBlockAllocator::mark_cached(std::int32_t page) {
  assert(refs_[static_cast<std::size_t>(page)] > 0 && "only a referenced page's content is indexed");
  state_[static_cast<std::size_t>(page)].cached = true;
}

}  // namespace sy
