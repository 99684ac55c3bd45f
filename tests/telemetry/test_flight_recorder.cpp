#include "telemetry/flight_recorder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <mutex>

#include <nlohmann/json.hpp>

#include "telemetry/telemetry_hub.h"
#include "telemetry/trace_reader.h"
#include "tests/telemetry/test_support.h"

namespace sy::telemetry {
namespace {

using testing::TempDir;

constexpr std::int64_t kSecond = 1'000'000'000;

// One 4 ms span every 10 ms on each of `devices` devices, over [from, to) seconds of run time.
std::vector<Span> steady_spans(std::int64_t from_s, std::int64_t to_s, int devices) {
  std::vector<Span> out;
  for (std::int64_t t = from_s * kSecond; t < to_s * kSecond; t += 10'000'000) {
    for (int d = 0; d < devices; ++d) {
      Span s;
      s.device = d;
      s.start_ns = t;
      s.end_ns = t + 4'000'000;
      s.kind = SpanKind::Expert;
      s.block = static_cast<std::int32_t>((t / 10'000'000) % 32);
      s.tokens = 16;
      out.push_back(s);
    }
  }
  return out;
}

std::unique_ptr<TraceReader> reopen(const std::filesystem::path& path) {
  auto r = TraceReader::open(path);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(FlightRecorder, NeedsABound) {
  EXPECT_FALSE(FlightRecorder::create({}).ok());
  FlightRecorderOptions o;
  o.keep_ns = -1;
  EXPECT_FALSE(FlightRecorder::create(o).ok());
}

// Five minutes go in, one is kept: the dump holds exactly the spans of the last minute.
TEST(FlightRecorder, KeepsTheLastMinuteAndWritesIt) {
  TempDir dir;
  FlightRecorderOptions o;
  o.keep_ns = 60 * kSecond;
  o.block_records = 1000;
  auto ring = FlightRecorder::create(o);
  ASSERT_TRUE(ring.ok());
  const auto spans = steady_spans(0, 300, 2);
  for (std::size_t i = 0; i < spans.size(); i += 500)
    (*ring)->add(std::span(spans).subspan(i, std::min<std::size_t>(500, spans.size() - i)));
  RequestEvent early, late;
  early.t_ns = 10 * kSecond;
  late.t_ns = 290 * kSecond;
  const std::vector<RequestEvent> requests = {early, late};
  (*ring)->add(requests);

  const FlightRecorderStats st = (*ring)->stats();
  EXPECT_GT(st.evicted, spans.size() / 2);
  // In memory: about a minute of 200 spans a second, compressed.
  EXPECT_LT(st.bytes, 12'000u * 48u / 4u);

  RecorderOptions to;
  to.path = dir / "ring.db";
  ASSERT_TRUE(write_flight_snapshot((*ring)->snapshot(), to).ok());
  auto reader = reopen(to.path);
  ASSERT_TRUE(reader);
  auto got = reader->spans();
  ASSERT_TRUE(got.ok());
  const std::int64_t newest = spans.back().end_ns;
  const auto expected = std::count_if(spans.begin(), spans.end(),
                                      [&](const Span& s) { return s.end_ns >= newest - 60 * kSecond; });
  EXPECT_EQ(static_cast<std::int64_t>(got->size()), expected);
  EXPECT_GE(got->front().end_ns, newest - 60 * kSecond);
  EXPECT_EQ(got->back().end_ns, newest);
  auto req = reader->requests();
  ASSERT_TRUE(req.ok());
  ASSERT_EQ(req->size(), 1u);
  EXPECT_EQ(req->at(0).t_ns, late.t_ns);
  EXPECT_EQ(reader->metadata().at("flight_recorder"), "1");
}

TEST(FlightRecorder, AByteBoundDropsTheOldestBlocks) {
  const auto spans = steady_spans(0, 200, 4);
  FlightRecorderOptions o;
  o.keep_ns = 1000 * kSecond;  // keeps everything: how many bytes is that?
  o.block_records = 1000;
  auto all = FlightRecorder::create(o);
  ASSERT_TRUE(all.ok());
  (*all)->add(spans);
  std::uint64_t total = 0;
  for (const auto& b : (*all)->snapshot().blocks) total += b.block.data.size();
  o.keep_ns = 0;
  o.max_bytes = total / 4;
  auto ring = FlightRecorder::create(o);
  ASSERT_TRUE(ring.ok());
  (*ring)->add(spans);
  const FlightSnapshot snap = (*ring)->snapshot();
  std::uint64_t bytes = 0;
  for (const auto& b : snap.blocks) bytes += b.block.data.size();
  EXPECT_LE(bytes, o.max_bytes);
  ASSERT_FALSE(snap.blocks.empty());
  EXPECT_GT(snap.blocks.front().block.start_ns, 100 * kSecond) << "the oldest went first";
  EXPECT_GT((*ring)->stats().evicted, 0u);
}

// Through the hub, as the engine runs it: two minutes of spans, quiet summary windows, then a
// window whose ITL p99 crosses the trigger. The dump holds the minute before that window's end.
TEST(FlightRecorder, ATriggerDumpsTheMinuteBeforeIt) {
  TempDir dir;
  HubOptions ho;
  ho.drain_interval = std::chrono::milliseconds(2);
  auto hub = TelemetryHub::start(ho);
  ASSERT_TRUE(hub.ok()) << hub.status().message();
  Producer& worker = (*hub)->add_producer("w");

  FlightRecorderOptions o;
  o.keep_ns = 60 * kSecond;
  RingTrigger trigger;
  trigger.itl_p99_ms = 10;
  RecorderOptions to;
  to.path = dir / "incident.db";
  to.device_names = {"a0", "e0"};
  std::mutex mu;
  std::vector<RingDumpEvent> events;
  ASSERT_TRUE((*hub)->start_ring(o, trigger, to, [&](const RingDumpEvent& e) {
    std::lock_guard lock(mu);
    events.push_back(e);
  }).ok());
  EXPECT_FALSE((*hub)->start_ring(o, trigger, to).ok()) << "one ring at a time";

  auto summary = [&](std::int64_t end_s, double p99) {
    const nlohmann::json s = {{"t_begin_ns", (end_s - 1) * kSecond}, {"t_end_ns", end_s * kSecond},
                              {"itl_ms", {{"count", 10}, {"p99", p99}}}};
    ASSERT_TRUE((*hub)->publish_json(Topic::Summary, s.dump()).ok());
  };
  const auto spans = steady_spans(0, 120, 2);
  std::size_t next = 0;
  for (std::int64_t second = 1; second <= 120; ++second) {
    for (; next < spans.size() && spans[next].start_ns < second * kSecond; ++next) {
      while (!worker.span(spans[next])) (*hub)->flush();  // never lose one to a full ring
    }
    (*hub)->flush();
    summary(second, second == 120 ? 50.0 : 2.0);  // the incident closes the 120th window
    (*hub)->flush();
  }
  ASSERT_TRUE(testing::eventually([&] {
    std::lock_guard lock(mu);
    return !events.empty();
  }));
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_TRUE(events[0].status.ok()) << events[0].status.message();
    EXPECT_NE(events[0].reason.find("itl_p99_ms 50"), std::string::npos) << events[0].reason;
  }
  auto reader = reopen(to.path);
  ASSERT_TRUE(reader);
  EXPECT_NE(reader->metadata().at("trigger").find("itl_p99_ms"), std::string::npos);
  auto got = reader->spans();
  ASSERT_TRUE(got.ok());
  ASSERT_FALSE(got->empty());
  // From a minute before the newest span up to the incident, nothing older, nothing missing.
  const std::int64_t newest = spans.back().end_ns;
  EXPECT_GE(got->front().end_ns, newest - 60 * kSecond);
  EXPECT_LE(got->front().start_ns, newest - 59 * kSecond);
  EXPECT_EQ(got->back().end_ns, newest);
  const auto expected = std::count_if(spans.begin(), spans.end(),
                                      [&](const Span& s) { return s.end_ns >= newest - 60 * kSecond; });
  EXPECT_EQ(static_cast<std::int64_t>(got->size()), expected);
  auto sums = reader->summaries();
  ASSERT_TRUE(sums.ok());
  EXPECT_GE(sums->size(), 59u);  // the windows of that minute, the incident's included
  EXPECT_NE(sums->back().find("50"), std::string::npos);

  // record_dump on demand still works after the trigger (which fired once).
  RecorderOptions again;
  again.path = dir / "later.db";
  EXPECT_TRUE((*hub)->dump_ring(again).ok());
  EXPECT_TRUE((*hub)->stop_ring().ok());
  EXPECT_FALSE((*hub)->dump_ring(again).ok());
}

// A rank of a multi-process deployment found dead (the control event `rank_lost`) fires a
// ring armed for it; other control events and ordinary summaries do not.
TEST(FlightRecorder, ALostRankFiresARingArmedForIt) {
  TempDir dir;
  HubOptions ho;
  ho.drain_interval = std::chrono::milliseconds(2);
  auto hub = TelemetryHub::start(ho);
  ASSERT_TRUE(hub.ok()) << hub.status().message();
  Producer& worker = (*hub)->add_producer("w");
  FlightRecorderOptions o;
  o.keep_ns = 60 * kSecond;
  RingTrigger trigger;
  trigger.rank_lost = true;
  ASSERT_TRUE(trigger.armed());
  RecorderOptions to;
  to.path = dir / "lost.db";
  to.device_names = {"a0", "e0"};
  std::mutex mu;
  std::vector<RingDumpEvent> events;
  ASSERT_TRUE((*hub)->start_ring(o, trigger, to, [&](const RingDumpEvent& e) {
    std::lock_guard lock(mu);
    events.push_back(e);
  }).ok());
  for (const Span& s : steady_spans(0, 5, 2))
    while (!worker.span(s)) (*hub)->flush();
  const nlohmann::json summary = {{"t_begin_ns", 4 * kSecond}, {"t_end_ns", 5 * kSecond}, {"itl_ms", {{"p99", 1e6}}}};
  ASSERT_TRUE((*hub)->publish_json(Topic::Summary, summary.dump()).ok());
  const nlohmann::json other = {{"t_ns", 5 * kSecond}, {"cmd", "set_policy"}, {"ok", true}};
  ASSERT_TRUE((*hub)->publish_json(Topic::Control, other.dump()).ok());
  (*hub)->flush();
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(events.empty()) << "fired by " << events[0].reason;
  }
  const nlohmann::json lost = {{"t_ns", 5 * kSecond}, {"cmd", "rank_lost"}, {"ok", true}, {"rank", 2},
                               {"reason", "rank 2 stopped answering (no heartbeat for 610 ms)"}};
  ASSERT_TRUE((*hub)->publish_json(Topic::Control, lost.dump()).ok());
  (*hub)->flush();
  ASSERT_TRUE(testing::eventually([&] {
    std::lock_guard lock(mu);
    return !events.empty();
  }));
  std::lock_guard lock(mu);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].status.ok()) << events[0].status.message();
  EXPECT_EQ(events[0].reason, "rank_lost: rank 2 stopped answering (no heartbeat for 610 ms)");
  auto reader = reopen(to.path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->metadata().at("trigger"), events[0].reason);
  auto got = reader->spans();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), steady_spans(0, 5, 2).size());
}

}  // namespace
}  // namespace sy::telemetry
