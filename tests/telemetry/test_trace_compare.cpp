#include <gtest/gtest.h>

#include "telemetry/trace_compare.h"
#include "telemetry/trace_reader.h"
#include "telemetry/trace_recorder.h"
#include "tests/telemetry/test_support.h"

namespace sy::telemetry {
namespace {

using testing::TempDir;

// Ten seconds of two devices: device 0 works `busy` of each 10 ms (rows of 8 tokens, a
// sampler span of 2 tokens every 10 ms) and stalls at a barrier the rest; device 1 only stalls
// on an empty queue. Device 0 has `queued` tokens waiting throughout; after each of its
// executions it waits `host` of the 10 ms on the host (neither busy nor stalled).
void record(const std::filesystem::path& path, double busy, std::int64_t queued, bool windows, double host = 0) {
  RecorderOptions o;
  o.path = path;
  o.span_windows = windows;
  o.device_names = {"a0", "e0"};
  auto r = TraceRecorder::open(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<Span> spans;
  std::vector<QueueSample> queues;
  const std::int64_t step = 10'000'000, work = static_cast<std::int64_t>(busy * static_cast<double>(step));
  const auto gap = static_cast<std::int64_t>(host * static_cast<double>(step));
  for (std::int64_t t = 0; t < 10'000'000'000; t += step) {
    Span s;
    s.device = 0;
    s.start_ns = t;
    s.end_ns = t + work - 1000;
    s.kind = SpanKind::Expert;
    s.tokens = 8;
    spans.push_back(s);
    s.start_ns = t + work - 1000;
    s.end_ns = t + work;
    s.kind = SpanKind::Sampler;
    s.tokens = 2;
    spans.push_back(s);
    s.start_ns = t + work + gap;
    s.end_ns = t + step;
    s.kind = SpanKind::Stall;
    s.stall_reason = StallReason::Barrier;
    s.tokens = 0;
    spans.push_back(s);
    s.stall_reason = StallReason::None;
    Span idle;
    idle.device = 1;
    idle.start_ns = t;
    idle.end_ns = t + step;
    idle.kind = SpanKind::Stall;
    idle.stall_reason = StallReason::QueueEmpty;
    spans.push_back(idle);
    QueueSample q;
    q.device = 0;
    q.t_ns = t;
    q.depth_tokens = queued;
    queues.push_back(q);
  }
  (*r)->add(spans);
  (*r)->add(queues);
  ASSERT_TRUE((*r)->stop().ok());
}

// The profile of the recording at `path`.
StatusOr<RunProfile> profile_at(const std::filesystem::path& path, const char* label) {
  auto reader = TraceReader::open(path);
  if (!reader.ok()) return reader.status();
  return profile_trace(**reader, label);
}

TEST(TraceCompare, ProfilesDevicesAndComparesTwoRuns) {
  TempDir dir;
  record(dir / "a.db", 0.5, 10, true);
  record(dir / "b.db", 0.8, 30, true);
  auto a = profile_at(dir / "a.db", "a");
  auto b = profile_at(dir / "b.db", "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->from_windows);
  ASSERT_EQ(a->devices.size(), 2u);
  const DeviceProfile& a0 = a->devices[0];
  EXPECT_EQ(a0.name, "a0");
  EXPECT_NEAR(a0.busy_share, 0.5, 0.002);
  EXPECT_NEAR(a0.stall_by_reason[static_cast<std::size_t>(StallReason::Barrier)], 0.5, 0.002);
  EXPECT_NEAR(a0.rows_per_s, 1000.0, 1.0);  // 100 executions a second of 8 + 2 rows
  EXPECT_NEAR(a0.sampled_per_s, 200.0, 0.5);
  EXPECT_NEAR(a0.mean_queued_tokens, 10.0, 0.05);
  EXPECT_NEAR(a->devices[1].stall_by_reason[static_cast<std::size_t>(StallReason::QueueEmpty)], 1.0, 0.002);
  EXPECT_NEAR(b->devices[0].busy_share, 0.8, 0.002);

  const std::string table = format_comparison(*a, *b);
  EXPECT_NE(table.find("a0"), std::string::npos) << table;
  EXPECT_NE(table.find("e0"), std::string::npos) << table;
  EXPECT_NE(table.find("+30.0"), std::string::npos) << table;   // busy share, points
  EXPECT_NE(table.find("-30.0"), std::string::npos) << table;   // barrier stalls, points
  EXPECT_NE(table.find("3.00x"), std::string::npos) << table;   // queued tokens
  EXPECT_DOUBLE_EQ(a0.host_share, 0);
  EXPECT_EQ(table.find("host"), std::string::npos) << table;  // no host time in either run
}

// A run whose device waits on the host after each execution: the profile says how long, and the
// comparison names it beside the stalls that gave it the time.
TEST(TraceCompare, HostTimeIsWhatBusyAndTheStallsLeave) {
  TempDir dir;
  record(dir / "a.db", 0.5, 10, true);
  record(dir / "b.db", 0.5, 10, true, 0.2);
  auto a = profile_at(dir / "a.db", "a");
  auto b = profile_at(dir / "b.db", "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(b->devices[0].host_share, 0.2, 0.002);
  EXPECT_NEAR(b->devices[0].stall_by_reason[static_cast<std::size_t>(StallReason::Barrier)], 0.3, 0.002);
  EXPECT_DOUBLE_EQ(b->devices[1].host_share, 0);
  const std::string table = format_comparison(*a, *b);
  EXPECT_NE(table.find("barrier -20.0, host +20.0"), std::string::npos) << table;
}

TEST(TraceCompare, ARecordingWithoutWindowsIsProfiledFromItsSpansAlike) {
  TempDir dir;
  record(dir / "v3.db", 0.5, 10, true);
  record(dir / "v2.db", 0.5, 10, false);
  auto r3 = TraceReader::open(dir / "v3.db");
  auto r2 = TraceReader::open(dir / "v2.db");
  ASSERT_TRUE(r3.ok() && r2.ok());
  EXPECT_EQ((*r2)->schema_version(), 2);
  EXPECT_FALSE((*r2)->has_span_windows());
  auto p3 = profile_trace(**r3, "v3");
  auto p2 = profile_trace(**r2, "v2");
  ASSERT_TRUE(p3.ok() && p2.ok());
  EXPECT_FALSE(p2->from_windows);
  ASSERT_EQ(p2->devices.size(), p3->devices.size());
  for (std::size_t i = 0; i < p2->devices.size(); ++i) {
    EXPECT_NEAR(p2->devices[i].busy_share, p3->devices[i].busy_share, 1e-9);
    EXPECT_NEAR(p2->devices[i].rows_per_s, p3->devices[i].rows_per_s, 1e-6);
    EXPECT_NEAR(p2->devices[i].mean_queued_tokens, p3->devices[i].mean_queued_tokens, 1e-6);
  }
}

}  // namespace
}  // namespace sy::telemetry
