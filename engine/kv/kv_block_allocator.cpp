#include "engine/kv/kv_block_allocator.h"

#include <cassert>

namespace sy {

KvBlockAllocator::KvBlockAllocator(std::int32_t num_pages, std::int32_t page_size)
    : num_pages_(num_pages), page_size_(page_size) {
  assert(num_pages >= 0 && page_size > 0);
  free_.reserve(static_cast<std::size_t>(num_pages));
  for (std::int32_t p = num_pages - 1; p >= 0; --p) free_.push_back(p);
}

std::int32_t KvBlockAllocator::allocate_page() {
  if (free_.empty()) return -1;
  const std::int32_t page = free_.back();
  free_.pop_back();
  return page;
}

void KvBlockAllocator::free_page(std::int32_t page) {
  assert(page >= 0 && page < num_pages_);
  free_.push_back(page);
}

}  // namespace sy
