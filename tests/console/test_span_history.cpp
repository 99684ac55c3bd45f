// The compact lane store (sealed, compressed chunks) against a plain reference, and the reduced
// detail (window series) the timeline falls back on.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "console/model/lane_spans.h"
#include "console/model/span_folding.h"
#include "console/model/span_history.h"
#include "console/model/span_store.h"

namespace sy::console {
namespace {

using telemetry::Lane;
using telemetry::Span;
using telemetry::SpanKind;
using telemetry::StallReason;

// What LaneSpans must behave like: a sorted vector (late spans after every span starting no
// later) with a running maximum of ends over everything ever added.
struct Reference {
  std::vector<Span> spans;
  std::vector<std::int64_t> max_end;
  std::size_t dropped = 0;
  std::int64_t dropped_max = std::numeric_limits<std::int64_t>::min();

  void add(const Span& s) {
    auto pos = std::upper_bound(spans.begin() + static_cast<std::ptrdiff_t>(dropped), spans.end(), s.start_ns,
                                [](std::int64_t t, const Span& x) { return t < x.start_ns; });
    spans.insert(pos, s);
    rebuild();
  }
  void rebuild() {
    max_end.resize(spans.size());
    std::int64_t running = std::numeric_limits<std::int64_t>::min();
    for (std::size_t i = 0; i < spans.size(); ++i) max_end[i] = running = std::max(running, spans[i].end_ns);
  }
  std::size_t size() const { return spans.size() - dropped; }
  const Span& at(std::size_t i) const { return spans[dropped + i]; }
};

Span make(std::int64_t start, std::int64_t length, int i) {
  Span s;
  s.device = 2;
  s.lane = Lane::Compute;
  s.start_ns = start;
  s.end_ns = start + length;
  s.kind = i % 5 == 0 ? SpanKind::Stall : (i % 2 ? SpanKind::Expert : SpanKind::Attention);
  s.stall_reason = s.kind == SpanKind::Stall ? StallReason::Barrier : StallReason::None;
  s.tokens = i % 97;
  s.block = i % 32;
  s.index = i % 8;
  return s;
}

TEST(LaneSpans, CompressedChunksReadBackAsTheSpansAddedInStartOrder) {
  LaneSpans lane;
  Reference ref;
  std::mt19937_64 rng(7);
  std::int64_t t = 1'000'000;
  const int n = 5 * static_cast<int>(LaneSpans::kChunk) + 321;
  for (int i = 0; i < n; ++i) {
    t += static_cast<std::int64_t>(rng() % 900);
    // Every 50th span arrives late, some far enough back to land in a sealed chunk.
    const std::int64_t start = i % 50 == 49 ? t - static_cast<std::int64_t>(rng() % 6'000'000) : t;
    const Span s = make(start, static_cast<std::int64_t>(rng() % 3000), i);
    lane.add(s);
    ref.add(s);
  }
  ASSERT_EQ(lane.size(), ref.size());
  for (std::size_t i = 0; i < ref.size(); i += 7) {
    const Span got = lane[i];
    ASSERT_EQ(got.start_ns, ref.at(i).start_ns) << i;
    ASSERT_EQ(got.end_ns, ref.at(i).end_ns) << i;
    ASSERT_EQ(got.tokens, ref.at(i).tokens) << i;
    ASSERT_EQ(got.kind, ref.at(i).kind) << i;
    ASSERT_EQ(lane.max_end_through(i), ref.max_end[i]) << i;
  }
  for (int k = 0; k < 200; ++k) {
    const std::int64_t q = 1'000'000 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(t - 1'000'000));
    const auto expect_start = static_cast<std::size_t>(
        std::lower_bound(ref.spans.begin(), ref.spans.end(), q, [](const Span& s, std::int64_t v) { return s.start_ns < v; }) -
        ref.spans.begin());
    const auto expect_after = static_cast<std::size_t>(
        std::upper_bound(ref.spans.begin(), ref.spans.end(), q, [](std::int64_t v, const Span& s) { return v < s.start_ns; }) -
        ref.spans.begin());
    const auto expect_end =
        static_cast<std::size_t>(std::lower_bound(ref.max_end.begin(), ref.max_end.end(), q) - ref.max_end.begin());
    EXPECT_EQ(lane.first_starting_at_or_after(q), expect_start);
    EXPECT_EQ(lane.first_starting_after(q), expect_after);
    EXPECT_EQ(lane.first_ending_at_or_after(q), expect_end);
  }
  // Compact: the sealed spans cost a fraction of their 48-byte records (the newest stay records).
  const std::size_t open = 2 * LaneSpans::kChunk * (sizeof(Span) + sizeof(std::int64_t));
  EXPECT_LT(lane.held_bytes(), open + (ref.size() - LaneSpans::kChunk) * 16) << lane.held_bytes();

  // Dropping from the front, inside a chunk and across chunks, keeps indices and searches right.
  for (std::size_t drop : {std::size_t{100}, LaneSpans::kChunk, std::size_t{3}, 2 * LaneSpans::kChunk + 17}) {
    lane.drop_front(drop);
    ref.dropped += drop;
    ASSERT_EQ(lane.size(), ref.size());
    for (std::size_t i = 0; i < ref.size(); i += 211) ASSERT_EQ(lane[i].start_ns, ref.at(i).start_ns) << i;
    const std::int64_t q = ref.at(ref.size() / 2).start_ns;
    EXPECT_EQ(lane.first_starting_at_or_after(q) + ref.dropped,
              static_cast<std::size_t>(std::lower_bound(ref.spans.begin(), ref.spans.end(), q,
                                                        [](const Span& s, std::int64_t v) { return s.start_ns < v; }) -
                                       ref.spans.begin()));
  }
  const std::int64_t cutoff = ref.at(ref.size() - 100).end_ns;
  const std::size_t went = lane.drop_ended_before(cutoff);
  EXPECT_GT(went, 0u);
  EXPECT_GE(lane[0].end_ns, cutoff);
  lane.clear();
  EXPECT_TRUE(lane.empty());
}

TEST(SpanHistory, TheWholeRunStaysAfterRetentionDropsItsSpans) {
  SpanStore store;
  // 30 s of a device: 10 ms of expert work then 10 ms of barrier stall, over and over.
  for (std::int64_t t = 0; t < 30'000'000'000; t += 20'000'000) {
    Span work = make(t, 10'000'000, 1);
    work.kind = SpanKind::Expert;
    work.stall_reason = StallReason::None;
    Span stall = make(t + 10'000'000, 10'000'000, 0);
    store.add(work);
    store.add(stall);
  }
  store.trim(25'000'000'000);
  EXPECT_GE(store.begin_ns(), 24'990'000'000);
  const WindowSeries* coarse = store.history().coarse(2, Lane::Compute);
  const WindowSeries* fine = store.history().fine(2, Lane::Compute);
  ASSERT_NE(coarse, nullptr);
  ASSERT_NE(fine, nullptr);
  EXPECT_EQ(coarse->begin_ns(), 0);
  EXPECT_EQ(coarse->size(), 30u);
  EXPECT_EQ((*coarse)[3].spans, 100);
  EXPECT_EQ((*coarse)[3].busy_ns(), 500'000'000);
  EXPECT_EQ((*coarse)[3].stall_ns[static_cast<std::size_t>(StallReason::Barrier)], 500'000'000);
  EXPECT_EQ(fine->begin_ns(), 25'000'000'000);

  // Zoomed out on the run's start, the timeline draws the window totals: half busy, half stalled.
  std::vector<TimelineItem> items;
  const LaneDetail detail{&store.lane(2, Lane::Compute), fine, coarse};
  fold_lane_detail(detail, 0, 10'000'000'000, {.ns_per_pixel = 10'000'000, .min_width_px = 3}, items);
  ASSERT_FALSE(items.empty());
  for (const auto& item : items) {
    EXPECT_TRUE(item.aggregate);
    EXPECT_NEAR(item.busy_share, 0.5, 0.01);
    EXPECT_NEAR(item.stall_share, 0.5, 0.01);
    EXPECT_EQ(item.stall_reason, StallReason::Barrier);
    EXPECT_EQ(item.kind, SpanKind::Expert);
  }
  // Zoomed into what is held, the spans themselves.
  items.clear();
  fold_lane_detail(detail, 29'000'000'000, 29'100'000'000, {.ns_per_pixel = 100'000, .min_width_px = 3}, items);
  ASSERT_FALSE(items.empty());
  for (const auto& item : items) EXPECT_FALSE(item.aggregate);
  // A view across the retention edge: windows before it, spans after, nothing overlapping.
  items.clear();
  fold_lane_detail(detail, 24'900'000'000, 25'100'000'000, {.ns_per_pixel = 200'000, .min_width_px = 3}, items);
  bool windows = false, spans = false;
  for (const auto& item : items) {
    (item.aggregate ? windows : spans) = true;
    if (item.aggregate) {
      EXPECT_LE(item.end_ns, store.lane(2, Lane::Compute)[0].start_ns);
    }
  }
  EXPECT_TRUE(windows && spans);
}

TEST(SpanHistory, TheWholeRunSeriesDoublesItsWindowInsteadOfGrowingPastItsCap) {
  WindowSeries s(10);
  for (std::int64_t t = 0; t < 100; t += 5) s.add(make(t, 5, 1), 1000);
  EXPECT_EQ(s.size(), 10u);
  s.coarsen();
  EXPECT_EQ(s.window_ns(), 20);
  EXPECT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].spans, 4);
  EXPECT_EQ(s[0].busy_ns(), 20);
  EXPECT_FALSE(s.add(make(1'000'000, 5, 1), 1000)) << "beyond the cap: the caller coarsens";
}

}  // namespace
}  // namespace sy::console
