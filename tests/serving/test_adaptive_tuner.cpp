// The adaptive policy's online tuner on synthetic observations: when it probes, what it keeps,
// its hysteresis on the load and on the choice.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "engine/serving/adaptive_tuner.h"

namespace sy {
namespace {

AdaptiveTuning tuning() {
  AdaptiveTuning t;
  t.warmup_windows = 2;
  t.load_windows = 1;  // each window's batch decides (averaging is the coordinator's window count)
  t.confirm_windows = 2;
  t.steady_windows = 2;
  return t;
}

// A synthetic cluster: the ITL each policy gives at a decode batch, and whether it keeps up.
struct Cluster {
  std::function<double(PolicyKind, double running)> itl_ms;
  std::function<double(PolicyKind, double running)> queue_delay_ms = [](PolicyKind, double) { return 1.0; };
  std::function<double(PolicyKind, double running)> served = [](PolicyKind, double r) { return 1000 * r; };
};

TunerObservation window(const Cluster& c, PolicyKind p, double running, std::int64_t t) {
  TunerObservation o;
  o.t_ns = t;
  o.window_s = 0.1;
  o.policy = p;
  o.offered_tokens_per_s_per_rank = 100 * running;
  o.arrivals = 10;
  o.running_per_rank = running;
  o.itl_ms = c.itl_ms(p, running);
  o.itl_samples = 100;
  o.queue_delay_ms = c.queue_delay_ms(p, running);
  o.served_tokens_per_s = c.served(p, running);
  return o;
}

// Runs the tuner over a batch per window, applying every switch at once; returns the decisions.
std::vector<TunerDecision> run(AdaptiveTuner& tuner, const Cluster& c, const std::vector<double>& running) {
  std::vector<TunerDecision> out;
  std::int64_t t = 0;
  for (double r : running) {
    if (auto d = tuner.observe(window(c, tuner.current(), r, t += 100'000'000))) out.push_back(*d);
  }
  return out;
}

// Sync's iteration costs the same for any batch; async's grows with it (our clusters' shape).
const Cluster kCrossing{[](PolicyKind p, double r) {
  return p == PolicyKind::Sync ? 14.0 : p == PolicyKind::PingPong ? 13.0 + 0.25 * r : 12.0 + 0.5 * r;
}};

TEST(AdaptiveTuner, FirstProbeMeasuresEveryCandidateAfterTheWarmupAndKeepsTheFastest) {
  AdaptiveTuner tuner(tuning(), PolicyKind::Sync);
  const auto d = run(tuner, kCrossing, {1, 1, 1, 1, 1, 1, 1});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_TRUE(d[0].probing);
  EXPECT_EQ(d[0].from, PolicyKind::Sync);
  EXPECT_EQ(d[0].to, PolicyKind::PingPong);
  EXPECT_TRUE(d[1].probing);
  EXPECT_EQ(d[1].to, PolicyKind::Async);
  // At one request per rank async (12.5 ms) beats pingpong (13.25) and sync (14): it was the
  // last probed, so the choice keeps it in force without a switch.
  EXPECT_FALSE(d[2].probing);
  EXPECT_EQ(d[2].from, PolicyKind::Async);
  EXPECT_EQ(d[2].to, PolicyKind::Async);
  EXPECT_NE(d[2].reason.find("sync 14.00 ms"), std::string::npos) << d[2].reason;
  EXPECT_NE(d[2].reason.find("keeps async"), std::string::npos) << d[2].reason;
  EXPECT_NE(d[2].reason.find("drained 0.0 ms"), std::string::npos) << d[2].reason;
  EXPECT_EQ(tuner.current(), PolicyKind::Async);
  EXPECT_FALSE(tuner.probing());
}

TEST(AdaptiveTuner, FollowsWhicheverOrderTheClusterShows) {
  // Async at a small batch, sync at a large one: the order the old bands could not express.
  AdaptiveTuner tuner(tuning(), PolicyKind::Sync);
  run(tuner, kCrossing, {1, 1, 1, 1, 1, 1});
  ASSERT_EQ(tuner.current(), PolicyKind::Async);
  const auto d = run(tuner, kCrossing, {20, 20, 20, 20, 20, 20});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_NE(d[0].reason.find("20.0 requests running"), std::string::npos) << d[0].reason;
  EXPECT_EQ(d.back().to, PolicyKind::Sync);  // 14 ms against pingpong's 18 and async's 22
  EXPECT_EQ(tuner.current(), PolicyKind::Sync);
  // And back when the batch falls again: to the choice measured there before, without a probe.
  const auto back = run(tuner, kCrossing, {1, 1, 1, 1, 1, 1});
  ASSERT_EQ(back.size(), 1u);
  EXPECT_FALSE(back[0].probing);
  EXPECT_EQ(back[0].to, PolicyKind::Async);
  EXPECT_NE(back[0].reason.find("(not probed again)"), std::string::npos) << back[0].reason;
  EXPECT_EQ(tuner.current(), PolicyKind::Async);
  EXPECT_EQ(tuner.probed().size(), 2u);
}

TEST(AdaptiveTuner, NoProbeWhileTheBatchRampsOrAQueueGrowsOnlyOnceTheLoadHolds) {
  AdaptiveTuning t = tuning();
  t.steady_windows = 5;
  AdaptiveTuner tuner(t, PolicyKind::Sync);
  std::int64_t at = 0;
  // A run's first seconds: the batch grows two requests per window.
  for (double r = 2; r <= 40; r += 2) EXPECT_FALSE(tuner.observe(window(kCrossing, tuner.current(), r, at += 100'000'000)).has_value()) << r;
  // Then the batch is full and the queue behind it grows two requests per rank per window.
  for (int w = 0; w < 10; ++w) {
    TunerObservation o = window(kCrossing, tuner.current(), 40, at += 100'000'000);
    o.waiting_per_rank = 2 * w;
    EXPECT_FALSE(tuner.observe(o).has_value()) << w;
  }
  // The queue holds at 20: once the last steady_windows windows spread at most 15 % (18 to 20
  // after three more), the probe.
  std::vector<TunerDecision> d;
  for (int w = 0; w < 4; ++w) {
    TunerObservation o = window(kCrossing, tuner.current(), 40, at += 100'000'000);
    o.waiting_per_rank = 20;
    if (auto x = tuner.observe(o)) d.push_back(*x);
  }
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].probing);
}

TEST(AdaptiveTuner, NoProbeOnceArrivalsStop) {
  AdaptiveTuner tuner(tuning(), PolicyKind::Sync);
  std::int64_t at = 0;
  for (int w = 0; w < 10; ++w) {
    TunerObservation o = window(kCrossing, tuner.current(), 20, at += 100'000'000);
    o.arrivals = 0;  // a batch still steady while the last requests finish
    EXPECT_FALSE(tuner.observe(o).has_value()) << w;
  }
  // Sparse arrivals (one every third window) are no drain: at that rate three empty windows
  // are due about once.
  AdaptiveTuner sparse(tuning(), PolicyKind::Sync);
  std::vector<TunerDecision> d;
  for (int w = 0; w < 6; ++w) {
    TunerObservation o = window(kCrossing, sparse.current(), 20, at += 100'000'000);
    o.arrivals = w % 3 == 0 ? 1 : 0;
    if (auto x = sparse.observe(o)) d.push_back(*x);
  }
  ASSERT_FALSE(d.empty());
  EXPECT_TRUE(d[0].probing);
}

TEST(AdaptiveTuner, AClearWinNeedsALargerMoveToProbeAgain) {
  // At 20 requests sync wins by 29 % (pingpong 18 ms against 14): the batch must move 80 %
  // (the most), not 30 %, before the losers are served again.
  AdaptiveTuner tuner(tuning(), PolicyKind::Sync);
  const auto d = run(tuner, kCrossing, {20, 20, 20, 20, 20, 20});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_NE(d.back().reason.find("probes again when the batch moves 80 %"), std::string::npos) << d.back().reason;
  EXPECT_TRUE(run(tuner, kCrossing, {30, 30, 30, 30, 10, 10, 10, 10}).empty());
  EXPECT_FALSE(run(tuner, kCrossing, {3, 3, 3}).empty());
  // A close win (async 12.5 against pingpong 13.25 at one request: 6 %) keeps the 30 %.
  AdaptiveTuner close(tuning(), PolicyKind::Sync);
  const auto c = run(close, kCrossing, {1, 1, 1, 1, 1, 1});
  ASSERT_EQ(c.size(), 3u);
  EXPECT_NE(c.back().reason.find("probes again when the batch moves 30 %"), std::string::npos) << c.back().reason;
}

TEST(AdaptiveTuner, ASmallOrShortChangeOfTheBatchDoesNotProbeAgain) {
  AdaptiveTuner tuner(tuning(), PolicyKind::Sync);
  run(tuner, kCrossing, {20, 20, 20, 20, 20, 20});
  ASSERT_EQ(tuner.current(), PolicyKind::Sync);
  EXPECT_TRUE(run(tuner, kCrossing, {24, 25, 24, 25}).empty());   // 25 % < 30 %
  EXPECT_TRUE(run(tuner, kCrossing, {40, 20, 40, 20}).empty());   // never two windows in a row
  // A large change probes once it held for confirm_windows windows.
  EXPECT_TRUE(run(tuner, kCrossing, {2}).empty());
  const auto d = run(tuner, kCrossing, {2});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].probing);
  EXPECT_NE(d[0].reason.find("for 2 windows"), std::string::npos) << d[0].reason;
  // At a small batch a change must also be a whole request per rank: 80 % of 1 is not.
  AdaptiveTuner small(tuning(), PolicyKind::Sync);
  run(small, kCrossing, {1, 1, 1, 1, 1, 1});
  ASSERT_FALSE(small.probing());
  EXPECT_TRUE(run(small, kCrossing, {1.8, 1.8, 1.8, 1.8}).empty());
}

TEST(AdaptiveTuner, AChallengerWithinTheMarginLeavesTheIncumbent) {
  const Cluster close{[](PolicyKind p, double) { return p == PolicyKind::Sync ? 14.0 : p == PolicyKind::Async ? 13.8 : 16.0; }};
  AdaptiveTuner tuner(tuning(), PolicyKind::Sync);
  const auto d = run(tuner, close, {5, 5, 5, 5, 5, 5});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.back().from, PolicyKind::Async);
  EXPECT_EQ(d.back().to, PolicyKind::Sync);  // 1.4 % faster is less than the 3 % margin
  EXPECT_NE(d.back().reason.find("in force before the probe"), std::string::npos) << d.back().reason;
}

TEST(AdaptiveTuner, WhereAPolicyFallsBehindTokensPerSecondDecide) {
  // Sync admits late (its queue waits 10 iterations) but serves the most; pingpong keeps up
  // at a lower rate. A policy behind the load serves its capacity: sync's is the larger.
  Cluster c{[](PolicyKind p, double) { return p == PolicyKind::Sync ? 17.0 : p == PolicyKind::PingPong ? 18.0 : 25.0; }};
  c.queue_delay_ms = [](PolicyKind p, double) { return p == PolicyKind::Sync ? 170.0 : 5.0; };
  c.served = [](PolicyKind p, double) { return p == PolicyKind::Sync ? 15000.0 : p == PolicyKind::PingPong ? 13000.0 : 9000.0; };
  AdaptiveTuner tuner(tuning(), PolicyKind::Sync);
  const auto d = run(tuner, c, {60, 60, 60, 60, 60, 60});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.back().to, PolicyKind::Sync);
  EXPECT_NE(d.back().reason.find("sync 17.00 ms 15000 tok/s (fell behind)"), std::string::npos) << d.back().reason;
  // The same ITLs with nobody behind: pingpong's ITL loses to sync's, async's too.
  Cluster kept = c;
  kept.queue_delay_ms = [](PolicyKind, double) { return 5.0; };
  kept.itl_ms = [](PolicyKind p, double) { return p == PolicyKind::PingPong ? 15.0 : 17.0; };
  AdaptiveTuner t2(tuning(), PolicyKind::Sync);
  const auto d2 = run(t2, kept, {60, 60, 60, 60, 60, 60});
  ASSERT_EQ(d2.size(), 3u);
  EXPECT_EQ(d2.back().to, PolicyKind::PingPong);
}

TEST(AdaptiveTuner, WindowsTooThinToMeasureNeitherStartAProbeNorWinOne) {
  AdaptiveTuner tuner(tuning(), PolicyKind::Sync);
  TunerObservation o = window(kCrossing, PolicyKind::Sync, 1, 0);
  o.itl_samples = 3;
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(tuner.observe(o).has_value());
  // A probe whose async window saw too few tokens keeps a measured policy.
  AdaptiveTuner t2(tuning(), PolicyKind::Sync);
  std::vector<TunerDecision> d;
  for (int i = 0; i < 6; ++i) {
    TunerObservation w = window(kCrossing, t2.current(), 1, i);
    if (w.policy == PolicyKind::Async) w.itl_samples = 3;
    if (auto x = t2.observe(w)) d.push_back(*x);
  }
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d.back().to, PolicyKind::PingPong);
  EXPECT_NE(d.back().reason.find("(too few tokens)"), std::string::npos) << d.back().reason;
}

TEST(AdaptiveTuner, AnOperatorsSwitchAbandonsTheProbe) {
  AdaptiveTuner tuner(tuning(), PolicyKind::Sync);
  const auto d = run(tuner, kCrossing, {1, 1, 1});
  ASSERT_EQ(d.size(), 1u);
  ASSERT_TRUE(tuner.probing());
  tuner.set_current(PolicyKind::Sync);
  EXPECT_FALSE(tuner.probing());
  // A window under another policy than the one probed measures nothing for the probe.
  AdaptiveTuner t2(tuning(), PolicyKind::Sync);
  run(t2, kCrossing, {1, 1, 1});
  ASSERT_TRUE(t2.probing());
  EXPECT_FALSE(t2.observe(window(kCrossing, PolicyKind::Sync, 1, 0)).has_value());
  EXPECT_TRUE(t2.probing());
}

}  // namespace
}  // namespace sy
