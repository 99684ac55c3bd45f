// Page accounting of one paged KV cache: which pages are free, and how many a number of
// positions needs. The storage itself (host or device memory) belongs to the backend.
#pragma once

#include <cstdint>
#include <vector>

namespace sy {

class KvBlockAllocator {
 public:
  KvBlockAllocator(std::int32_t num_pages, std::int32_t page_size);

  std::int32_t page_size() const { return page_size_; }
  std::int32_t num_pages() const { return num_pages_; }
  std::int32_t free_pages() const { return static_cast<std::int32_t>(free_.size()); }
  // Pages needed to hold `positions` positions.
  std::int32_t pages_for(std::int64_t positions) const {
    return static_cast<std::int32_t>((positions + page_size_ - 1) / page_size_);
  }
  // Takes a free page; -1 when none is left.
  std::int32_t allocate_page();
  void free_page(std::int32_t page);

 private:
  std::int32_t num_pages_, page_size_;
  std::vector<std::int32_t> free_;  // a stack: recently freed pages are reused first (warm)
};

}  // namespace sy
