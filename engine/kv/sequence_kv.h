// One sequence's share of a paged KV cache: its block table (the pages holding its positions,
// in order) and how many positions are written.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv/kv_block_allocator.h"

namespace sy {

class SequenceKv {
 public:
  // Makes sure positions [0, positions) have pages; false (nothing taken) when the cache is
  // too full, so the caller can queue or reject the request instead of failing mid-step.
  bool reserve(KvBlockAllocator& allocator, std::int64_t positions);
  // Starts the table with pages other sequences hold too (a prefix cache's), one reference each.
  void share(KvBlockAllocator& allocator, const std::vector<std::int32_t>& pages);
  // Drops its reference to every page.
  void release(KvBlockAllocator& allocator);
  // Takes pages another process's allocator handed out (a mirror of its block table).
  void adopt(std::vector<std::int32_t> pages) { pages_ = std::move(pages); }

  const std::int32_t* block_table() const { return pages_.data(); }
  std::int32_t pages() const { return static_cast<std::int32_t>(pages_.size()); }
  std::int32_t length = 0;  // positions already written

 private:
  std::vector<std::int32_t> pages_;
};

}  // namespace sy
