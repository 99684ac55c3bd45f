// Prefix caching's page accounting: shared pages counted per reference, cached pages kept
// until an allocation needs them (least recently released first), the index matching whole
// pages of identical content only and forgetting what the allocator takes back; and the block
// manager admitting with a cached prefix, never sharing a prompt's last page.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "engine/kv/kv_block_allocator.h"
#include "engine/kv/kv_block_manager.h"
#include "engine/kv/prefix_cache.h"

namespace sy {
namespace {

std::vector<std::int32_t> iota(std::int32_t n, std::int32_t from = 0) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

TEST(KvBlockAllocator, SharedPagesAreFreedByTheirLastReference) {
  KvBlockAllocator a(4, 2);
  const std::int32_t p = a.allocate_page();
  a.retain_page(p);
  EXPECT_EQ(a.references(p), 2);
  a.free_page(p);
  EXPECT_EQ(a.free_pages(), 3);
  a.free_page(p);
  EXPECT_EQ(a.free_pages(), 4);
  EXPECT_EQ(a.evictable_pages(), 0);
}

TEST(KvBlockAllocator, CachedPagesAreEvictedOldestReleaseFirstAndOnlyWhenNothingIsFree) {
  KvBlockAllocator a(3, 2);
  std::vector<std::int32_t> evicted;
  a.set_on_evict([&](std::int32_t page) { evicted.push_back(page); });
  const std::int32_t x = a.allocate_page(), y = a.allocate_page();
  a.mark_cached(x);
  a.mark_cached(y);
  a.free_page(y);  // released first: evicted first
  a.free_page(x);
  EXPECT_EQ(a.free_pages(), 3);
  EXPECT_EQ(a.evictable_pages(), 2);
  const std::int32_t z = a.allocate_page();  // the free one
  EXPECT_NE(z, x);
  EXPECT_NE(z, y);
  EXPECT_TRUE(evicted.empty());
  EXPECT_EQ(a.allocate_page(), y);
  EXPECT_EQ(evicted, std::vector<std::int32_t>{y});
  EXPECT_EQ(a.evictions(), 1);
  EXPECT_FALSE(a.cached(y));
  // A retained evictable page is safe from eviction.
  a.retain_page(x);
  EXPECT_EQ(a.allocate_page(), -1);
  a.free_page(x);
  EXPECT_EQ(a.allocate_page(), x);
  EXPECT_EQ(evicted, (std::vector<std::int32_t>{y, x}));
}

TEST(PrefixCache, MatchesWholePagesOfTheSameLeadingTokens) {
  KvBlockAllocator a(8, 4);
  PrefixCache cache(a);
  const std::vector<std::int32_t> prompt = iota(10);  // pages [0..3], [4..7], and 2 tokens
  std::vector<std::int32_t> table;
  for (int i = 0; i < 3; ++i) table.push_back(a.allocate_page());
  cache.insert(prompt, table);
  EXPECT_EQ(cache.indexed_pages(), 2);  // the partial third page is not indexed
  EXPECT_EQ(cache.match(prompt, 8), (std::vector<std::int32_t>{table[0], table[1]}));
  EXPECT_EQ(cache.match(prompt, 1), (std::vector<std::int32_t>{table[0]}));
  std::vector<std::int32_t> other = prompt;
  other[5] = 99;  // differs in the second page
  EXPECT_EQ(cache.match(other, 8), (std::vector<std::int32_t>{table[0]}));
  other = prompt;
  other[0] = 99;  // differs in the first page: nothing, even though the second page's tokens agree
  EXPECT_TRUE(cache.match(other, 8).empty());
  // The second page's tokens after another first page are other content.
  std::vector<std::int32_t> shifted = {7, 7, 7, 7, 4, 5, 6, 7};
  EXPECT_TRUE(cache.match(shifted, 8).empty());
  EXPECT_TRUE(cache.match(std::vector<std::int32_t>{0, 1, 2}, 8).empty());  // shorter than a page
}

TEST(PrefixCache, ForgetsWhatTheAllocatorEvictsAndItsChildrenBecomeUnreachable) {
  KvBlockAllocator a(2, 2);
  PrefixCache cache(a);
  const std::vector<std::int32_t> prompt = {1, 2, 3, 4};
  const std::vector<std::int32_t> table = {a.allocate_page(), a.allocate_page()};
  cache.insert(prompt, table);
  a.free_page(table[1]);  // the child released first, evicted first
  a.free_page(table[0]);
  EXPECT_EQ(cache.match(prompt, 2), table);
  const std::int32_t taken = a.allocate_page();
  EXPECT_EQ(taken, table[1]);
  EXPECT_EQ(cache.match(prompt, 2), std::vector<std::int32_t>{table[0]});
  EXPECT_EQ(cache.indexed_pages(), 1);
  // The page, reused for other content and indexed as such, is not matched as the old child.
  cache.insert(std::vector<std::int32_t>{1, 2, 9, 9}, std::vector<std::int32_t>{table[0], taken});
  EXPECT_EQ(cache.match(prompt, 2), std::vector<std::int32_t>{table[0]});
  EXPECT_EQ(cache.match(std::vector<std::int32_t>{1, 2, 9, 9}, 2), (std::vector<std::int32_t>{table[0], taken}));
  // Evicting the parent leaves the child unreachable, and it goes when its turn comes.
  a.free_page(taken);
  const std::int32_t again = a.allocate_page();
  EXPECT_EQ(again, table[0]);  // released longest ago
  EXPECT_TRUE(cache.match(std::vector<std::int32_t>{1, 2, 9, 9}, 2).empty());
  EXPECT_EQ(a.allocate_page(), taken);
  EXPECT_EQ(cache.indexed_pages(), 0);
}

TEST(PrefixCache, TheSameContentInAnotherPageStaysPrivateAndItsSuccessorsChainOn) {
  KvBlockAllocator a(6, 2);
  PrefixCache cache(a);
  const std::vector<std::int32_t> first = {1, 2};
  const std::vector<std::int32_t> t1 = {a.allocate_page()};
  cache.insert(first, t1);
  // A second sequence computed the same first page itself, and one more.
  const std::vector<std::int32_t> t2 = {a.allocate_page(), a.allocate_page()};
  cache.insert(std::vector<std::int32_t>{1, 2, 3, 4}, t2);
  EXPECT_FALSE(a.cached(t2[0]));
  EXPECT_TRUE(a.cached(t2[1]));
  EXPECT_EQ(cache.match(std::vector<std::int32_t>{1, 2, 3, 4}, 2), (std::vector<std::int32_t>{t1[0], t2[1]}));
  a.free_page(t2[0]);
  EXPECT_EQ(a.evictable_pages(), 0);  // private: freed outright
}

TEST(KvBlockManager, AdmitsWithTheCachedPrefixButComputesThePromptsLastPage) {
  KvBlockManager kv(8, 4);
  kv.enable_prefix_cache();
  const std::vector<std::int32_t> prompt = iota(8);  // exactly two pages
  ASSERT_TRUE(kv.admit(1, 12, {}, prompt));
  EXPECT_EQ(kv.cached_positions(1), 0);
  kv.cache_written(1, prompt);
  // The same prompt again: its last page holds the last token, which must be computed.
  EXPECT_EQ(kv.cached_pages(prompt), 1);
  ASSERT_TRUE(kv.admit(2, 12, {}, prompt));
  EXPECT_EQ(kv.cached_positions(2), 4);
  EXPECT_EQ(kv.context(2).block_table[0], kv.context(1).block_table[0]);
  EXPECT_NE(kv.context(2).block_table[1], kv.context(1).block_table[1]);
  EXPECT_EQ(kv.used_pages(), 3 + 2);
  // A longer prompt sharing both pages.
  std::vector<std::int32_t> longer = iota(11);
  EXPECT_EQ(kv.cached_pages(longer), 2);
  kv.release(1);
  kv.release(2);
  EXPECT_EQ(kv.used_pages(), 0);
  EXPECT_EQ(kv.free_pages(), 8);
  // Released, the pages stay cached for the next one.
  ASSERT_TRUE(kv.admit(3, 11, {}, longer));
  EXPECT_EQ(kv.cached_positions(3), 8);
  kv.release(3);
}

TEST(KvBlockManager, FitsCountsIdleCachedHitsAsTaken) {
  KvBlockManager kv(3, 2);
  kv.enable_prefix_cache();
  const std::vector<std::int32_t> prompt = {5, 6, 7};
  ASSERT_TRUE(kv.admit(1, 3, {}, prompt));  // two pages
  kv.cache_written(1, prompt);
  kv.release(1);
  EXPECT_EQ(kv.free_pages(), 3);
  // 6 positions: three pages, one shared; the shared one is among the "free" three.
  EXPECT_TRUE(kv.fits(6, prompt));
  EXPECT_FALSE(kv.fits(8, prompt));
  ASSERT_TRUE(kv.admit(2, 6, {}, prompt));
  EXPECT_EQ(kv.cached_positions(2), 2);
  EXPECT_EQ(kv.free_pages(), 0);
  kv.release(2);
}

TEST(KvBlockManager, WithoutPrefixCachingNothingIsShared) {
  KvBlockManager kv(8, 4);
  const std::vector<std::int32_t> prompt = iota(9);
  ASSERT_TRUE(kv.admit(1, 9, {}, prompt));
  kv.cache_written(1, prompt);
  EXPECT_EQ(kv.cached_pages(prompt), 0);
  ASSERT_TRUE(kv.admit(2, 9, {}, prompt));
  EXPECT_EQ(kv.cached_positions(2), 0);
  kv.release(1);
  kv.release(2);
  EXPECT_EQ(kv.free_pages(), 8);
}

}  // namespace
}  // namespace sy
