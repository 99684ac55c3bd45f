#include "engine/kv/sequence_kv.h"

namespace sy {

bool SequenceKv::reserve(KvBlockAllocator& allocator, std::int64_t positions) {
  const std::int32_t needed = allocator.pages_for(positions) - pages();
  if (needed <= 0) return true;
  if (needed > allocator.free_pages()) return false;
  for (std::int32_t i = 0; i < needed; ++i) pages_.push_back(allocator.allocate_page());
  return true;
}

void SequenceKv::share(KvBlockAllocator& allocator, const std::vector<std::int32_t>& pages) {
  for (std::int32_t page : pages) {
    allocator.retain_page(page);
    pages_.push_back(page);
  }
}

void SequenceKv::release(KvBlockAllocator& allocator) {
  for (std::int32_t page : pages_) allocator.free_page(page);
  pages_.clear();
  length = 0;
}

}  // namespace sy
