#include <gtest/gtest.h>

#include <set>

#include "engine/kv/kv_block_allocator.h"
#include "engine/kv/paged_kv_cache.h"
#include "engine/kv/sequence_kv.h"

namespace sy {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.num_layers = 2;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  return c;
}

TEST(SequenceKv, ReserveTakesWholePagesAndReleaseReturnsThem) {
  KvBlockAllocator cache(10, 4);
  SequenceKv a, b;
  ASSERT_TRUE(a.reserve(cache, 5));  // 2 pages
  EXPECT_EQ(a.pages(), 2);
  ASSERT_TRUE(a.reserve(cache, 8));  // still 2
  EXPECT_EQ(a.pages(), 2);
  ASSERT_TRUE(b.reserve(cache, 13));  // 4 pages
  EXPECT_EQ(cache.free_pages(), 4);
  std::set<std::int32_t> used(a.block_table(), a.block_table() + a.pages());
  used.insert(b.block_table(), b.block_table() + b.pages());
  EXPECT_EQ(used.size(), 6u) << "a page was handed out twice";
  a.release(cache);
  EXPECT_EQ(cache.free_pages(), 6);
  EXPECT_EQ(a.pages(), 0);
}

TEST(SequenceKv, RefusesWithoutTakingAnythingWhenFull) {
  KvBlockAllocator cache(3, 4);
  SequenceKv a;
  EXPECT_FALSE(a.reserve(cache, 13));  // needs 4 of 3
  EXPECT_EQ(cache.free_pages(), 3);
  EXPECT_EQ(a.pages(), 0);
  EXPECT_TRUE(a.reserve(cache, 12));
  EXPECT_EQ(cache.free_pages(), 0);
}

TEST(PagedKvCache, LayersDoNotOverlap) {
  PagedKvCache cache(small_config(), 3, 4);
  auto l0 = cache.layer(0), l1 = cache.layer(1);
  const std::int64_t elems = 3 * 4 * 2 * 8;
  EXPECT_GE(l1.k - l0.k, elems);
  EXPECT_EQ(cache.bytes(), 2 * 2 * elems * 4);
}

}  // namespace
}  // namespace sy
