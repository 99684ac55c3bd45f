#include <gtest/gtest.h>

#include "telemetry/span_windows.h"

namespace sy::telemetry {
namespace {

Span span(std::int64_t start, std::int64_t end, SpanKind kind, std::int64_t tokens = 0,
          StallReason reason = StallReason::None, std::int32_t device = 0) {
  Span s;
  s.start_ns = start;
  s.end_ns = end;
  s.kind = kind;
  s.tokens = tokens;
  s.stall_reason = reason;
  s.device = device;
  return s;
}

TEST(SpanWindows, SplitsTimeAcrossWindowsAndCountsSpansWhereTheyStart) {
  SpanWindowAccumulator acc(100);
  acc.add(span(10, 60, SpanKind::Expert, 32));
  acc.add(span(60, 250, SpanKind::Stall, 0, StallReason::Barrier));  // crosses two edges
  acc.add(span(250, 260, SpanKind::Sampler, 4));
  std::vector<SpanWindow> out;
  acc.close_before(200, out);  // [0,100) and [100,200) are closed, [200,300) stays open
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].start_ns, 0);
  EXPECT_EQ(out[0].spans, 2);
  EXPECT_EQ(out[0].tokens, 32);
  EXPECT_EQ(out[0].kind_ns[static_cast<std::size_t>(SpanKind::Expert)], 50);
  EXPECT_EQ(out[0].stalled_ns(), 40);
  EXPECT_EQ(out[0].stall_ns[static_cast<std::size_t>(StallReason::Barrier)], 40);
  EXPECT_EQ(out[0].busy_ns(), 50);
  EXPECT_EQ(out[1].spans, 0);  // the stall started before it
  EXPECT_EQ(out[1].stalled_ns(), 100);
  out.clear();
  acc.close_all(out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].start_ns, 200);
  EXPECT_EQ(out[0].stalled_ns(), 50);
  EXPECT_EQ(out[0].sampled_tokens, 4);
  EXPECT_EQ(out[0].busy_ns(), 10);
}

TEST(SpanWindows, IntegratesEachDevicesQueuedTokensOverTime) {
  SpanWindowAccumulator acc(100);
  QueueSample a;
  a.device = 1;
  a.block = 0;
  a.t_ns = 0;
  a.depth_tokens = 10;
  acc.add(a);
  QueueSample b = a;  // another queue of the same device
  b.block = 1;
  b.t_ns = 50;
  b.depth_tokens = 6;
  acc.add(b);
  a.t_ns = 150;
  a.depth_tokens = 0;
  acc.add(a);
  std::vector<SpanWindow> out;
  acc.close_before(200, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].device, 1);
  EXPECT_EQ(out[0].lane, Lane::Compute);
  EXPECT_EQ(out[0].queue_token_ns, 10 * 50 + 16 * 50);  // 10 tokens, then 16
  EXPECT_EQ(out[1].queue_token_ns, 16 * 50 + 6 * 50);   // 16, then 6 until the window closes
}

TEST(SpanWindows, WindowStartIsAFloorForNegativeTimes) {
  EXPECT_EQ(window_start(-1, 100), -100);
  EXPECT_EQ(window_start(-100, 100), -100);
  EXPECT_EQ(window_start(99, 100), 0);
}

}  // namespace
}  // namespace sy::telemetry
