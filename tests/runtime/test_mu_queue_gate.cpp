// The async μ-queue gate: its rule from a cost curve, and when it lets a queue run.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/runtime/mu_queue_gate.h"

namespace sy {
namespace {

TEST(MuQueueGate, MinimumBatchIsWhereRowsStopRidingFree) {
  // Weight-bound up to 100 rows (the read costs 200 µs), then 2 µs a row, plus a 10 µs launch:
  // the most rows within 10 % of one row's cost (231 µs) is 110.
  const auto roofline = [](std::int64_t n) { return std::max<std::int64_t>(200'000, 2'000 * n) + 10'000; };
  const MuQueueGate g = MuQueueGate::from_cost(roofline);
  EXPECT_EQ(g.min_rows, 110);
  EXPECT_EQ(g.max_wait_ns, roofline(110));  // never wait longer than the execution it saves
  EXPECT_FALSE(g.trivial());
  // A larger slack waits for more rows.
  EXPECT_EQ(MuQueueGate::from_cost(roofline, 0.5).min_rows, 152);
}

TEST(MuQueueGate, LinearCostsGiveTheRowsWithinTheSlack) {
  // 1 ms fixed + 10 µs a row: 1.1 × 1.01 ms covers 11 rows.
  const MuQueueGate g = MuQueueGate::from_cost([](std::int64_t n) { return 1'000'000 + 10'000 * n; });
  EXPECT_EQ(g.min_rows, 11);
  EXPECT_EQ(g.max_wait_ns, 1'110'000);
}

TEST(MuQueueGate, ProportionalOrFreeExecutionsAreNotGated) {
  // Every row costs the same: one row wastes nothing, so nothing waits.
  EXPECT_TRUE(MuQueueGate::from_cost([](std::int64_t n) { return 1'000 * n; }).trivial());
  EXPECT_TRUE(MuQueueGate::from_cost([](std::int64_t) { return std::int64_t{0}; }).trivial());
  // A cost flat to the search bound stops at the bound.
  EXPECT_EQ(MuQueueGate::from_cost([](std::int64_t) { return std::int64_t{500}; }, 0.1, 1000).min_rows, 1000);
}

TEST(MuQueueGate, OpensAtTheMinimumBatchOrAfterTheMaximumWait) {
  const MuQueueGate g{64, 300'000};
  EXPECT_TRUE(g.open(64, 1'000'000, 1'000'000));   // full enough at once
  EXPECT_FALSE(g.open(63, 1'000'000, 1'299'999));  // small and young
  EXPECT_TRUE(g.open(1, 1'000'000, 1'300'000));    // small but its oldest row has waited enough
  EXPECT_EQ(g.opens_at(1'000'000), 1'300'000);
}

}  // namespace
}  // namespace sy
