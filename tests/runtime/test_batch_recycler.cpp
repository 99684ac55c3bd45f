// The recycler hands back lists with their batches emptied in place, by length, and trims a
// list to the batches a dispatch filled; TokenBatch::append keeps every row's fields in order.
#include <gtest/gtest.h>

#include "engine/runtime/batch_recycler.h"

namespace sy {
namespace {

TokenBatch rows(std::int64_t first_request, int n, bool expert) {
  TokenBatch b;
  b.layer = expert ? LayerId::expert(3, 1) : LayerId::attention(3, 0);
  b.group = 2;
  b.oldest_ns = 77;
  b.columns = expert ? kAttentionColumns | kColumnSlot | kColumnWeight : kAttentionColumns;
  for (int i = 0; i < n; ++i) {
    b.row.push_back({.request = first_request + i, .position = 10 + i, .rank = i % 2});
    if (expert) {
      b.row.back().slot = i;
      b.row.back().weight = 0.5f + static_cast<float>(i);
    }
  }
  return b;
}

TEST(BatchRecycler, ListComesBackWithItsBatchesEmptied) {
  BatchRecycler r;
  std::vector<TokenBatch> l;
  l.push_back(rows(1, 3, true));
  l.push_back(rows(5, 2, true));
  const TokenRow* storage = l[0].row.data();
  r.give_list(l);
  EXPECT_TRUE(l.empty()) << "the list given is left empty";

  std::vector<TokenBatch> one;
  r.take_list(1, one);
  EXPECT_TRUE(one.empty()) << "a list is kept by its length";
  std::vector<TokenBatch> back;
  r.take_list(2, back);
  ASSERT_EQ(back.size(), 2u);
  for (const TokenBatch& b : back) {
    EXPECT_TRUE(b.empty());
    EXPECT_FALSE(b.has(kColumnSlot) || b.has(kColumnWeight) || b.has(kColumnPosition) || b.has(kColumnRank));
    EXPECT_EQ(b.group, -1);
    EXPECT_EQ(b.oldest_ns, 0);
    EXPECT_EQ(b.layer, LayerId{});
  }
  EXPECT_EQ(back[0].row.data(), storage) << "the batch keeps its storage for the next rows";
  std::vector<TokenBatch> none;
  r.take_list(2, none);
  EXPECT_TRUE(none.empty());

  // Given back and taken again: the slot its first stay emptied holds it.
  r.give_list(back);
  std::vector<TokenBatch> again;
  r.take_list(2, again);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].row.data(), storage);
}

TEST(BatchRecycler, TrimHandsTheUnfilledBatchesToTheSpares) {
  BatchRecycler r;
  std::vector<TokenBatch> l(3);
  l[0] = rows(1, 2, false);
  r.trim_list(l, 1);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].rows(), 2);
  EXPECT_EQ(r.spare(), 2u);
  TokenBatch& added = r.take_into(l);
  EXPECT_TRUE(added.empty());
  EXPECT_EQ(l.size(), 2u);
  EXPECT_EQ(r.spare(), 1u);
}

TEST(TokenBatch, AppendKeepsRowOrderForSmallAndLargeBatches) {
  for (int n : {1, 2, 4, 5, 40}) {
    TokenBatch a = rows(100, 3, true);
    a.append(rows(200, n, true));
    ASSERT_EQ(a.rows(), 3 + n);
    ASSERT_TRUE(a.has(kColumnSlot) && a.has(kColumnWeight));
    for (int i = 0; i < 3 + n; ++i) {
      const int j = i < 3 ? i : i - 3;
      EXPECT_EQ(a.at(i).request, (i < 3 ? 100 : 200) + j);
      EXPECT_EQ(a.at(i).position, 10 + j);
      EXPECT_EQ(a.at(i).slot, j);
      EXPECT_FLOAT_EQ(a.at(i).weight, 0.5f + static_cast<float>(j));
    }
    EXPECT_EQ(a.oldest_ns, 77) << "append keeps the batch's own identity";
  }
}

}  // namespace
}  // namespace sy
