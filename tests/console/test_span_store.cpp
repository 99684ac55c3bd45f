#include <gtest/gtest.h>

#include "console/model/span_store.h"

namespace sy::console {
namespace {

using telemetry::Lane;
using telemetry::Span;
using telemetry::SpanKind;

Span span(std::int32_t device, Lane lane, std::int64_t start, std::int64_t end) {
  Span s;
  s.device = device;
  s.lane = lane;
  s.start_ns = start;
  s.end_ns = end;
  s.kind = lane == Lane::Compute ? SpanKind::Expert : SpanKind::Transfer;
  return s;
}

TEST(LaneSpans, LateSpansAreInsertedInStartOrder) {
  LaneSpans lane;
  lane.add(span(0, Lane::Send, 0, 100));
  lane.add(span(0, Lane::Send, 50, 60));
  lane.add(span(0, Lane::Send, 200, 210));
  lane.add(span(0, Lane::Send, 20, 500));  // late and long
  ASSERT_EQ(lane.size(), 4u);
  EXPECT_EQ(lane[0].start_ns, 0);
  EXPECT_EQ(lane[1].start_ns, 20);
  EXPECT_EQ(lane[2].start_ns, 50);
  EXPECT_EQ(lane[3].start_ns, 200);
  // Running maximum of ends: 100, 500, 500, 500.
  EXPECT_EQ(lane.max_end_through(0), 100);
  EXPECT_EQ(lane.max_end_through(1), 500);
  EXPECT_EQ(lane.max_end_through(3), 500);
  EXPECT_EQ(lane.first_ending_at_or_after(101), 1u);
  EXPECT_EQ(lane.first_starting_at_or_after(50), 2u);
  EXPECT_EQ(lane.first_starting_after(50), 3u);
}

TEST(SpanStore, RejectsImplausibleSpans) {
  SpanStore store;
  EXPECT_FALSE(store.add(span(-1, Lane::Compute, 0, 1)));
  EXPECT_FALSE(store.add(span(SpanStore::kMaxDevices, Lane::Compute, 0, 1)));
  EXPECT_FALSE(store.add(span(0, Lane::Compute, 10, 5)));
  Span bad_lane = span(0, Lane::Compute, 0, 1);
  bad_lane.lane = static_cast<Lane>(7);
  EXPECT_FALSE(store.add(bad_lane));
  EXPECT_EQ(store.rejected(), 4u);
  EXPECT_TRUE(store.empty());
  EXPECT_TRUE(store.add(span(3, Lane::Receive, 0, 1)));
  EXPECT_EQ(store.device_count(), 4);
  EXPECT_EQ(store.lane(3, Lane::Receive).size(), 1u);
  EXPECT_EQ(store.lane(9, Lane::Receive).size(), 0u);
}

TEST(SpanStore, ATransferShowsOnItsDestinationsReceiveLane) {
  SpanStore store;
  Span t = span(1, Lane::Send, 100, 180);
  t.peer = 4;
  t.tokens = 12;
  ASSERT_TRUE(store.add(t));
  ASSERT_EQ(store.lane(1, Lane::Send).size(), 1u);
  ASSERT_EQ(store.lane(4, Lane::Receive).size(), 1u);
  const Span& r = store.lane(4, Lane::Receive)[0];
  EXPECT_EQ(r.device, 4);
  EXPECT_EQ(r.peer, 1);
  EXPECT_EQ(r.start_ns, 100);
  EXPECT_EQ(r.end_ns, 180);
  EXPECT_EQ(r.tokens, 12);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.lane(1, Lane::Receive).size(), 0u);
}

TEST(SpanStore, TrimByTimeDropsOnlySpansEndedBeforeTheCutoff) {
  SpanStore store;
  for (int i = 0; i < 100; ++i) store.add(span(i % 2, Lane::Compute, i * 10, i * 10 + 10));
  EXPECT_EQ(store.begin_ns(), 0);
  EXPECT_EQ(store.end_ns(), 1000);
  store.trim(505);  // spans ending before 505: those with end <= 500 -> i < 50
  EXPECT_EQ(store.size(), 50u);
  EXPECT_EQ(store.evicted(), 50u);
  EXPECT_EQ(store.begin_ns(), 500);
}

TEST(SpanStore, TrimBySpanBudgetKeepsTheNewest) {
  SpanStore store;
  for (int d = 0; d < 4; ++d)
    for (int i = 0; i < 1000; ++i) store.add(span(d, Lane::Compute, i * 100 + d, i * 100 + d + 50));
  store.trim(std::numeric_limits<std::int64_t>::min(), 1000);
  EXPECT_LE(store.size(), 1000u);
  EXPECT_GE(store.size(), 996u);  // the cut is one time for every lane
  EXPECT_EQ(store.end_ns(), 999 * 100 + 3 + 50);
  for (int d = 0; d < 4; ++d) EXPECT_EQ(store.lane(d, Lane::Compute)[store.lane(d, Lane::Compute).size() - 1].start_ns, 99900 + d);
  EXPECT_GE(store.begin_ns(), 75000);
}

}  // namespace
}  // namespace sy::console
