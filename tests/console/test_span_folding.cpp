#include <gtest/gtest.h>

#include <random>

#include "console/model/span_folding.h"

namespace sy::console {
namespace {

using telemetry::Lane;
using telemetry::Span;
using telemetry::SpanKind;

Span compute(std::int64_t start, std::int64_t end, SpanKind kind = SpanKind::Expert) {
  Span s;
  s.start_ns = start;
  s.end_ns = end;
  s.kind = kind;
  s.stall_reason = kind == SpanKind::Stall ? telemetry::StallReason::QueueEmpty : telemetry::StallReason::None;
  return s;
}

std::size_t represented(const std::vector<TimelineItem>& items) {
  std::size_t n = 0;
  for (const auto& i : items) n += i.count;
  return n;
}

// Spans overlapping [t0, t1], counted the slow way.
std::size_t overlapping(const LaneSpans& lane, std::int64_t t0, std::int64_t t1) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < lane.size(); ++i)
    if (lane[i].end_ns >= t0 && lane[i].start_ns <= t1) ++n;
  return n;
}

TEST(SpanFolding, WideSpansStayIndividual) {
  LaneSpans lane;
  for (int i = 0; i < 10; ++i) lane.add(compute(i * 1000, i * 1000 + 900));
  std::vector<TimelineItem> items;
  fold_lane(lane, 0, 10'000, {.ns_per_pixel = 10, .min_width_px = 3}, items);  // 900 ns = 90 px
  ASSERT_EQ(items.size(), 10u);
  for (std::size_t i = 0; i < items.size(); ++i) {
    EXPECT_FALSE(items[i].folded());
    EXPECT_EQ(items[i].first, i);
  }
}

TEST(SpanFolding, DenseNarrowSpansFoldIntoOneBlock) {
  LaneSpans lane;
  for (int i = 0; i < 100'000; ++i) lane.add(compute(i * 10, i * 10 + 8));  // 1 ms of 8 ns spans
  std::vector<TimelineItem> items;
  fold_lane(lane, 0, 1'000'000, {.ns_per_pixel = 1000, .min_width_px = 3, .max_fold_px = 2000}, items);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_TRUE(items[0].folded());
  EXPECT_EQ(items[0].count, 100'000u);
  EXPECT_EQ(items[0].start_ns, 0);
  EXPECT_EQ(items[0].end_ns, 999'998);
  EXPECT_EQ(items[0].kind, SpanKind::Expert);
}

TEST(SpanFolding, AGapWiderThanTheThresholdSplitsFolds) {
  LaneSpans lane;
  for (int i = 0; i < 100; ++i) lane.add(compute(i * 10, i * 10 + 5));
  for (int i = 0; i < 100; ++i) lane.add(compute(50'000 + i * 10, 50'000 + i * 10 + 5));
  std::vector<TimelineItem> items;
  fold_lane(lane, 0, 60'000, {.ns_per_pixel = 100, .min_width_px = 3}, items);  // 300 ns threshold
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].count, 100u);
  EXPECT_EQ(items[1].count, 100u);
  EXPECT_EQ(items[1].first, 100u);
  EXPECT_LT(items[0].end_ns, items[1].start_ns);
}

TEST(SpanFolding, AWideSpanEndsAFold) {
  LaneSpans lane;
  for (int i = 0; i < 50; ++i) lane.add(compute(i * 10, i * 10 + 5));
  lane.add(compute(500, 100'000, SpanKind::Attention));
  std::vector<TimelineItem> items;
  fold_lane(lane, 0, 100'000, {.ns_per_pixel = 100, .min_width_px = 3}, items);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].count, 50u);
  EXPECT_FALSE(items[1].folded());
  EXPECT_EQ(items[1].kind, SpanKind::Attention);
}

TEST(SpanFolding, FoldsAreColouredByTheirMostCommonKindAndFlagStalls) {
  LaneSpans lane;
  for (int i = 0; i < 64; ++i)
    lane.add(compute(i * 10, i * 10 + 5, i % 4 == 3 ? SpanKind::Stall : SpanKind::Attention));
  std::vector<TimelineItem> items;
  fold_lane(lane, 0, 1000, {.ns_per_pixel = 1000, .min_width_px = 3, .fold_samples = 64}, items);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].kind, SpanKind::Attention);
  EXPECT_TRUE(items[0].has_stall);
  EXPECT_FLOAT_EQ(items[0].stall_share, 0.25f);
  EXPECT_EQ(items[0].stall_reason, telemetry::StallReason::QueueEmpty);
}

TEST(SpanFolding, FoldsCloseAtTheirMaximumWidth) {
  LaneSpans lane;
  for (int i = 0; i < 100'000; ++i) lane.add(compute(i * 10, i * 10 + 8));
  std::vector<TimelineItem> items;
  fold_lane(lane, 0, 1'000'000, {.ns_per_pixel = 1000, .min_width_px = 3, .max_fold_px = 20}, items);
  // 1000 px of dense spans in folds of 20 px, each overshooting by at most one 3 px step.
  EXPECT_GE(items.size(), 42u);
  EXPECT_LE(items.size(), 51u);
  std::size_t n = 0;
  for (const auto& item : items) {
    n += item.count;
    EXPECT_LE(item.end_ns - item.start_ns, 23'000 + 10);
  }
  EXPECT_EQ(n, 100'000u);
}

TEST(SpanFolding, EverySpanInViewIsRepresentedExactlyOnceAtEveryZoom) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> gap(0, 2000), width(1, 5000);
  LaneSpans lane;
  std::int64_t t = 0;
  for (int i = 0; i < 20'000; ++i) {
    t += gap(rng);
    const std::int64_t w = width(rng);
    lane.add(compute(t, t + w));
    t += w;
  }
  for (double ns_per_px : {1.0, 37.0, 1000.0, 1e5, 1e7}) {
    for (auto [t0, t1] : {std::pair<std::int64_t, std::int64_t>{0, t}, {t / 3, t / 3 + 200'000}, {t - 5000, t + 5}}) {
      std::vector<TimelineItem> items;
      fold_lane(lane, t0, t1, {.ns_per_pixel = ns_per_px, .min_width_px = 3}, items);
      EXPECT_EQ(represented(items), overlapping(lane, t0, t1)) << ns_per_px << " " << t0;
      for (std::size_t i = 1; i < items.size(); ++i) {
        EXPECT_EQ(items[i].first, items[i - 1].first + items[i - 1].count);
        EXPECT_GE(items[i].start_ns, items[i - 1].end_ns);  // compute spans never overlap
      }
      // Level of detail bounds the work: never much more than one item per threshold width.
      const double px = static_cast<double>(t1 - t0) / ns_per_px;
      EXPECT_LE(static_cast<double>(items.size()), px / 3.0 * 2.0 + 4.0) << ns_per_px;
    }
  }
}

TEST(SpanFolding, OverlappingTransfersBeforeTheViewAreFoundByTheirEnd) {
  LaneSpans lane;
  lane.add(compute(0, 1'000'000, SpanKind::Transfer));  // long, starts far before the view
  for (int i = 1; i < 100; ++i) lane.add(compute(i * 1000, i * 1000 + 10, SpanKind::Transfer));
  std::vector<TimelineItem> items;
  fold_lane(lane, 500'000, 600'000, {.ns_per_pixel = 10, .min_width_px = 3}, items);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].first, 0u);
  EXPECT_EQ(items[0].end_ns, 1'000'000);
}

}  // namespace
}  // namespace sy::console
