// The schedulers as pure objects over hand-made queue grids (expected picks worked out by hand
// from AMoE Algorithm 1 and the two strawmen).
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>

#include "engine/runtime/scheduler.h"

namespace sy {
namespace {

QueueGrid grid(std::int32_t blocks, std::int32_t columns, std::vector<std::int64_t> tokens) {
  return QueueGrid::from(blocks, columns, std::move(tokens));
}

std::unique_ptr<Scheduler> make(const std::string& name, std::int32_t lookahead = 1, double decay = 0.5) {
  auto s = make_scheduler({name, lookahead, decay});
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

TEST(Schedulers, EmptyGridPicksNothing) {
  for (const char* name : {"defrag", "mtfs", "flfs", "tail"}) {
    EXPECT_FALSE(make(name)->pick(grid(3, 2, {0, 0, 0, 0, 0, 0}))) << name;
    EXPECT_FALSE(make(name)->pick(grid(0, 0, {}))) << name;
  }
}

// Q = [[1,0],[0,0],[6,0]], K=1, δ=0.5. Defrag: block 0 scores 1 + 0; block 2 scores
// 6 + (1/2)·0.5 = 6.25 -> (2,0). FLFS takes the earliest block, MTFS the fullest queue.
TEST(Schedulers, StrawmenDiffer) {
  const QueueGrid g = grid(3, 2, {1, 0, 0, 0, 6, 0});
  EXPECT_EQ(*make("defrag")->pick(g), (GridPick{2, 0}));
  EXPECT_EQ(*make("flfs")->pick(g), (GridPick{0, 0}));
  EXPECT_EQ(*make("mtfs")->pick(g), (GridPick{2, 0}));
}

// Q = [[3,0],[8,8],[5,0]], K=1, δ=1: block 0 = 3 + 16/2 = 11; block 1 = 8 + 5/2 = 10.5;
// block 2 = 5 + 3/2 = 6.5. The lookahead drains the small queue before the dense wave, where
// MTFS would take the fullest queue.
TEST(Schedulers, DefragLookaheadPullsTheQueueBeforeADenseWave) {
  const QueueGrid g = grid(3, 2, {3, 0, 8, 8, 5, 0});
  EXPECT_EQ(*make("defrag", 1, 1.0)->pick(g), (GridPick{0, 0}));
  EXPECT_EQ(*make("mtfs")->pick(g), (GridPick{1, 0}));
}

// Lookahead of K=2 blocks wrapping around (b + k) mod N_B, weighted δ^k.
TEST(Schedulers, DefragLookaheadWrapsAndDecays) {
  // Q = [[0,0],[4,16],[2,0]], δ=0.5; block densities d = (0, 10, 1).
  // b1: 0.5·d2 + 0.25·d0 = 0.5 -> (1,1) = 16.5; b2: 0.5·d0 + 0.25·d1 = 2.5 -> (2,0) = 4.5.
  EXPECT_EQ(*make("defrag", 2, 0.5)->pick(grid(3, 2, {0, 0, 4, 16, 2, 0})), (GridPick{1, 1}));
  // Q = [[0,0],[4,0],[2,0]], δ=0.5; d = (0, 2, 1): b1 = 4 + 0.5 = 4.5; b2 = 2 + 0.5 = 2.5.
  EXPECT_EQ(*make("defrag", 2, 0.5)->pick(grid(3, 2, {0, 0, 4, 0, 2, 0})), (GridPick{1, 0}));
  // Q = [[10,10],[4,0],[2,0]], δ=1; d = (10, 2, 1): b0 = 10 + d1 + d2 = 13;
  // b1 = 4 + d2 + d0 = 15; b2 = 2 + d0 + d1 = 14. The wrapped lookahead onto block 0's wave
  // makes block 1 win over the fuller block 0 queues.
  EXPECT_EQ(*make("defrag", 2, 1.0)->pick(grid(3, 2, {10, 10, 4, 0, 2, 0})), (GridPick{1, 0}));
}

// Algorithm 1's N_E is the number of experts the device hosts in the block looked at. Where the
// placement differs between blocks the grid's columns are their union, and a block's own width
// divides its tokens. Q = [[2,0,0,0],[3,0,0,0]], K=1, δ=1: over all 4 columns, block 0 scores
// 2 + 3/4 and block 1 3 + 2/4, so (1,0); block 1 holding one expert of its own, block 0 scores
// 2 + 3/1 = 5 and takes the pick.
TEST(Schedulers, DefragDividesEachBlockByItsOwnExperts) {
  QueueGrid g = grid(2, 4, {2, 0, 0, 0, 3, 0, 0, 0});
  EXPECT_EQ(*make("defrag", 1, 1.0)->pick(g), (GridPick{1, 0}));
  g.set_block_width(1, 1);
  EXPECT_EQ(g.block_width(0), 4);
  EXPECT_EQ(*make("defrag", 1, 1.0)->pick(g), (GridPick{0, 0}));
}

// AMoE Algorithm 1 as written: every (b, k) sums block b+k's queues and divides by its N_E;
// every positive, unheld queue scores LScore + Q; the argmax, ties to the lowest (block,
// expert). The same floating-point operations in the same order as the scheduler's, so its
// picks must match exactly on random grids with holds, per-block widths and wrap-around.
std::optional<GridPick> algorithm1(const QueueGrid& g, std::int32_t lookahead, double decay) {
  std::optional<GridPick> best;
  double best_score = 0;
  for (std::int32_t b = 0; b < g.blocks(); ++b) {
    double lscore = 0, weight = 1;
    for (std::int32_t k = 1; k <= lookahead; ++k) {
      weight *= decay;
      const std::int32_t ahead = (b + k) % g.blocks();
      std::int64_t total = 0;
      for (std::int32_t e = 0; e < g.columns(); ++e) total += g.at(ahead, e);
      lscore += static_cast<double>(total) / std::max(1, g.block_width(ahead)) * weight;  // + 0 where empty
    }
    for (std::int32_t e = 0; e < g.columns(); ++e) {
      if (!g.pickable(b, e)) continue;
      const double score = lscore + static_cast<double>(g.at(b, e));
      if (!best || score > best_score) {
        best = GridPick{b, e};
        best_score = score;
      }
    }
  }
  return best;
}

TEST(Schedulers, DefragPicksWhatAlgorithm1Picks) {
  std::mt19937_64 rng(17);
  const auto below = [&](std::int64_t n) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)); };
  for (int trial = 0; trial < 3000; ++trial) {
    const auto blocks = static_cast<std::int32_t>(1 + below(70));
    const auto columns = static_cast<std::int32_t>(1 + below(6));
    // Mostly AMoE's few blocks; sometimes past the ring (K > blocks) and past a word (K >= 64).
    const auto lookahead = static_cast<std::int32_t>(trial % 7 == 0 ? below(90) : below(6));
    const double decay = trial % 3 == 0 ? 1.0 : 0.1 + 0.9 * static_cast<double>(below(1000)) / 1000.0;
    const std::int64_t occupied_in_1000 = 1 + below(1000);
    QueueGrid g;
    g.reset(blocks, columns);
    for (std::int32_t b = 0; b < blocks; ++b)
      for (std::int32_t e = 0; e < columns; ++e)
        if (below(1000) < occupied_in_1000) g.set(b, e, 1 + below(trial % 2 ? 4 : 300));
    if (trial % 4 == 1)
      for (std::int32_t b = 0; b < blocks; ++b) g.set_block_width(b, static_cast<std::int32_t>(1 + below(columns)));
    if (trial % 5 == 2)
      for (std::int32_t i = 0; i < 1 + below(blocks * columns); ++i)
        g.hold(static_cast<std::int32_t>(below(blocks)), static_cast<std::int32_t>(below(columns)));
    auto scheduler = make("defrag", lookahead, decay);
    // Twice: a scheduler reused across picks must not carry anything from the last one.
    for (int again = 0; again < 2; ++again) EXPECT_EQ(scheduler->pick(g), algorithm1(g, lookahead, decay)) << trial;
  }
}

TEST(Schedulers, DefragWithoutLookaheadIsMostTokensFirst) {
  const QueueGrid g = grid(4, 3, {1, 2, 0, 0, 0, 7, 3, 3, 3, 0, 0, 1});
  EXPECT_EQ(*make("defrag", 0, 0.5)->pick(g), *make("mtfs")->pick(g));
  EXPECT_EQ(*make("mtfs")->pick(g), (GridPick{1, 2}));
}

// The schedulers visit occupied blocks only: the grid tracks them as cells fill and drain,
// across words of its block set (a 94-layer model has 95 blocks).
TEST(Schedulers, GridVisitsOccupiedBlocksAscending) {
  QueueGrid g;
  g.reset(130, 2);
  const auto visited = [&] {
    std::vector<std::int32_t> out;
    g.for_each_occupied_block([&](std::int32_t b) { out.push_back(b); });
    return out;
  };
  EXPECT_TRUE(visited().empty());
  for (std::int32_t b : {129, 0, 64, 63, 65}) g.set(b, 1, 3);
  g.set(64, 0, 2);
  EXPECT_EQ(visited(), (std::vector<std::int32_t>{0, 63, 64, 65, 129}));
  g.set(64, 1, 0);  // one cell of block 64 drains: still occupied
  g.set(63, 1, 0);
  g.set(129, 1, 0);
  EXPECT_EQ(visited(), (std::vector<std::int32_t>{0, 64, 65}));
  g.set(64, 0, 0);
  EXPECT_EQ(visited(), (std::vector<std::int32_t>{0, 65}));
  // Defrag across the word boundary, K=1, δ=1: Q[63] = [4,0], Q[64] = [8,8], Q[65] = [4,3],
  // Q[0] = [0,3]. Block 63 scores 4 + 16/2 = 12, block 64 8 + 7/2 = 11.5, block 65 4, block 0
  // 3: the small queue before the wave goes first, where MTFS takes the fullest.
  g.set(63, 0, 4);
  g.set(64, 0, 8);
  g.set(64, 1, 8);
  g.set(65, 0, 4);
  EXPECT_EQ(*make("defrag", 1, 1.0)->pick(g), (GridPick{63, 0}));
  EXPECT_EQ(*make("mtfs")->pick(g), (GridPick{64, 0}));
  g.reset(130, 2);
  EXPECT_TRUE(visited().empty());
}

TEST(Schedulers, GridSetWithTheBlockGivenMatchesSetByIndex) {
  // A worker gives the cell's block with its index (no division per set): random sets through
  // either form leave the same cells, block totals and occupied blocks.
  std::mt19937_64 rng(5);
  QueueGrid by_index, with_block;
  by_index.reset(70, 3);
  with_block.reset(70, 3);
  for (int i = 0; i < 5000; ++i) {
    const auto index = static_cast<std::size_t>(rng() % (70 * 3));
    const auto tokens = static_cast<std::int64_t>(rng() % 4 == 0 ? 0 : rng() % 9);
    by_index.set(index, tokens);
    with_block.set(index, index / 3, tokens);
  }
  std::vector<std::int32_t> a, b;
  by_index.for_each_occupied_block([&](std::int32_t x) { a.push_back(x); });
  with_block.for_each_occupied_block([&](std::int32_t x) { b.push_back(x); });
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a.empty());
  for (std::int32_t blk = 0; blk < 70; ++blk) {
    EXPECT_EQ(by_index.block_tokens(blk), with_block.block_tokens(blk));
    for (std::int32_t c = 0; c < 3; ++c) EXPECT_EQ(by_index.at(blk, c), with_block.at(blk, c));
  }
}

TEST(Schedulers, FlfsTakesTheFullestQueueOfTheEarliestBlock) {
  EXPECT_EQ(*make("flfs")->pick(grid(3, 3, {0, 0, 0, 1, 5, 2, 9, 9, 9})), (GridPick{1, 1}));
}

// Blocks 0..7 around a ring, one column. Occupied 1, 2, 5: the gaps before them are 3 (blocks
// 6, 7 and 0), 0 and 2 (3, 4). The widest ends at block 1, the train's tail, though block 5
// holds more.
TEST(Schedulers, TailTakesTheBlockAfterTheWidestGap) {
  EXPECT_EQ(*make("tail")->pick(grid(8, 1, {0, 1, 9, 0, 0, 9, 0, 0})), (GridPick{1, 0}));
  // Occupied 0, 1, 6, 7 (a train wrapping from the sampler's block to block 0): the widest gap
  // is 2-5, so the tail is block 6, where FLFS would take block 0.
  EXPECT_EQ(*make("tail")->pick(grid(8, 1, {4, 4, 0, 0, 0, 0, 1, 4})), (GridPick{6, 0}));
  EXPECT_EQ(*make("flfs")->pick(grid(8, 1, {4, 4, 0, 0, 0, 0, 1, 4})), (GridPick{0, 0}));
  // One occupied block: its fullest queue; equal gaps: the lowest block.
  EXPECT_EQ(*make("tail")->pick(grid(3, 3, {0, 0, 0, 1, 5, 2, 0, 0, 0})), (GridPick{1, 1}));
  EXPECT_EQ(*make("tail")->pick(grid(4, 1, {2, 0, 3, 0})), (GridPick{0, 0}));
}

// A held queue does not count: the tail is the first block with a queue the gate lets run.
TEST(Schedulers, TailSkipsHeldQueues) {
  QueueGrid g = grid(8, 2, {0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7, 1, 0, 0, 0, 0});
  EXPECT_EQ(*make("tail")->pick(g), (GridPick{1, 0}));
  g.hold(1, 0);
  EXPECT_EQ(*make("tail")->pick(g), (GridPick{5, 0}));
  g.hold(5, 0);
  EXPECT_EQ(*make("tail")->pick(g), (GridPick{5, 1}));
  g.hold(5, 1);
  EXPECT_FALSE(make("tail")->pick(g));
}

TEST(Schedulers, FactoryNamesBadParameters) {
  auto unknown = make_scheduler({"lifo", 1, 0.5});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("lifo"), std::string::npos);
  EXPECT_NE(make_scheduler({"defrag", -1, 0.5}).status().message().find("lookahead"), std::string::npos);
  EXPECT_NE(make_scheduler({"defrag", 1, 0.0}).status().message().find("decay"), std::string::npos);
  EXPECT_NE(make_scheduler({"defrag", 1, 1.5}).status().message().find("decay"), std::string::npos);
}

}  // namespace
}  // namespace sy
