// The adaptive policy's chooser on synthetic load: bands, hysteresis, confirmation.
#include <gtest/gtest.h>

#include <vector>

#include "engine/serving/adaptive_chooser.h"

namespace sy {
namespace {

AdaptiveThresholds thresholds() {
  AdaptiveThresholds t;
  t.pingpong_from = 1000;
  t.async_from = 3000;
  t.hysteresis = 0.1;
  t.confirm_windows = 2;
  t.smoothing = 1.0;  // no averaging: each window's load decides (tested apart below)
  return t;
}

// Feeds loads one window each; returns the policy after each window.
std::vector<PolicyKind> run(AdaptiveChooser& c, const std::vector<double>& loads, std::vector<AdaptiveDecision>* out = nullptr) {
  std::vector<PolicyKind> after;
  std::int64_t t = 0;
  for (double load : loads) {
    if (auto d = c.observe({t += 250'000'000, load})) {
      if (out) out->push_back(*d);
    }
    after.push_back(c.current());
  }
  return after;
}

TEST(AdaptiveChooser, BandsFollowTheLoad) {
  AdaptiveChooser c(thresholds(), PolicyKind::Sync);
  EXPECT_EQ(c.band(500), PolicyKind::Sync);
  EXPECT_EQ(c.band(1000), PolicyKind::PingPong);
  EXPECT_EQ(c.band(2999), PolicyKind::PingPong);
  EXPECT_EQ(c.band(3000), PolicyKind::Async);
}

TEST(AdaptiveChooser, SwitchesUpAndDownOnlyOnceConfirmed) {
  AdaptiveChooser c(thresholds(), PolicyKind::Sync);
  std::vector<AdaptiveDecision> d;
  const auto after = run(c, {500, 1200, 1200, 4000, 4000, 4000, 2000, 500, 500}, &d);
  using K = PolicyKind;
  EXPECT_EQ(after, (std::vector<K>{K::Sync, K::Sync, K::PingPong, K::PingPong, K::Async, K::Async, K::Async,
                                   K::Async, K::Sync}));
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].from, K::Sync);
  EXPECT_EQ(d[0].to, K::PingPong);
  EXPECT_EQ(d[0].reason, "offered 1200 tok/s per attention rank >= 1100 (pingpong from 1000 + margin) for 2 windows");
  EXPECT_EQ(d[2].to, K::Sync);  // 2000 then 500: the second window's choice differs, so it waits for 500 twice
}

TEST(AdaptiveChooser, HysteresisHoldsALoadNearTheBoundary) {
  AdaptiveChooser c(thresholds(), PolicyKind::Sync);
  // Oscillating around 3000 by less than the 10 % margin never leaves pingpong once there.
  const auto after = run(c, {2000, 2000, 3200, 2800, 3200, 2800, 3250, 2750});
  for (std::size_t i = 1; i < after.size(); ++i) EXPECT_EQ(after[i], PolicyKind::PingPong) << i;
}

TEST(AdaptiveChooser, AWindowAgainstTheTrendResetsTheConfirmation) {
  AdaptiveChooser c(thresholds(), PolicyKind::Sync);
  EXPECT_EQ(run(c, {5000, 500, 5000}).back(), PolicyKind::Sync);
  EXPECT_EQ(run(c, {5000}).back(), PolicyKind::Async);
}

TEST(AdaptiveChooser, WithoutAPingpongBandItGoesStraightToAsync) {
  AdaptiveThresholds t = thresholds();
  t.pingpong_from = 1e9;  // above async_from: pingpong is never chosen
  AdaptiveChooser c(t, PolicyKind::Sync);
  EXPECT_EQ(c.band(2000), PolicyKind::Sync);
  EXPECT_EQ(run(c, {2000, 2000, 3500, 3500}).back(), PolicyKind::Async);
  EXPECT_EQ(run(c, {2000, 2000}).back(), PolicyKind::Sync);
}

TEST(AdaptiveChooser, SmoothingAveragesWindows) {
  AdaptiveThresholds t = thresholds();
  t.smoothing = 0.5;
  AdaptiveChooser c(t, PolicyKind::Sync);
  run(c, {0, 4000});
  EXPECT_DOUBLE_EQ(c.load(), 2000);
  c.set_current(PolicyKind::Async);  // an operator's choice is where the chooser continues from
  EXPECT_EQ(c.current(), PolicyKind::Async);
}

}  // namespace
}  // namespace sy
