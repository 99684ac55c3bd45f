// The recycler hands back lists with their batches emptied in place, by length, and trims a
// list to the batches a dispatch filled; TokenBatch::append keeps every column in row order.
#include <gtest/gtest.h>

#include "engine/runtime/batch_recycler.h"

namespace sy {
namespace {

TokenBatch rows(std::int64_t first_request, int n, bool expert) {
  TokenBatch b;
  b.layer = expert ? LayerId::expert(3, 1) : LayerId::attention(3, 0);
  b.group = 2;
  b.oldest_ns = 77;
  for (int i = 0; i < n; ++i) {
    b.request.push_back(first_request + i);
    b.position.push_back(10 + i);
    b.rank.push_back(i % 2);
    if (expert) {
      b.slot.push_back(i);
      b.weight.push_back(0.5f + static_cast<float>(i));
    }
  }
  return b;
}

TEST(BatchRecycler, ListComesBackWithItsBatchesEmptied) {
  BatchRecycler r;
  std::vector<TokenBatch> l;
  l.push_back(rows(1, 3, true));
  l.push_back(rows(5, 2, true));
  const std::int64_t* storage = l[0].request.data();
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
    EXPECT_TRUE(b.slot.empty() && b.weight.empty() && b.position.empty() && b.rank.empty());
    EXPECT_EQ(b.group, -1);
    EXPECT_EQ(b.oldest_ns, 0);
    EXPECT_EQ(b.layer, LayerId{});
  }
  EXPECT_EQ(back[0].request.data(), storage) << "the batch keeps its storage for the next rows";
  std::vector<TokenBatch> none;
  r.take_list(2, none);
  EXPECT_TRUE(none.empty());

  // Given back and taken again: the slot its first stay emptied holds it.
  r.give_list(back);
  std::vector<TokenBatch> again;
  r.take_list(2, again);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].request.data(), storage);
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
    ASSERT_EQ(a.slot.size(), a.request.size());
    ASSERT_EQ(a.weight.size(), a.request.size());
    for (int i = 0; i < 3 + n; ++i) {
      const auto u = static_cast<std::size_t>(i);
      const int j = i < 3 ? i : i - 3;
      EXPECT_EQ(a.request[u], (i < 3 ? 100 : 200) + j);
      EXPECT_EQ(a.position[u], 10 + j);
      EXPECT_EQ(a.slot[u], j);
      EXPECT_FLOAT_EQ(a.weight[u], 0.5f + static_cast<float>(j));
    }
    EXPECT_EQ(a.oldest_ns, 77) << "append keeps the batch's own identity";
  }
}

}  // namespace
}  // namespace sy
