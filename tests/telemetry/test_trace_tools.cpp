#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "telemetry/chrome_trace_export.h"
#include "telemetry/trace_recorder.h"
#include "telemetry/trace_summary.h"
#include "tests/telemetry/test_support.h"

namespace sy::telemetry {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr std::int64_t kMs = 1'000'000;

Span compute(std::int64_t start, std::int64_t end, std::int32_t device, SpanKind kind, std::int64_t tokens,
             StallReason reason = StallReason::None) {
  Span s;
  s.start_ns = start;
  s.end_ns = end;
  s.device = device;
  s.kind = kind;
  s.tokens = tokens;
  s.stall_reason = reason;
  s.block = 1;
  s.index = 2;
  return s;
}

RequestEvent request(std::int64_t t, std::int64_t id, RequestPhase phase, std::int32_t out) {
  RequestEvent e;
  e.t_ns = t;
  e.request_id = id;
  e.phase = phase;
  e.tokens_out = out;
  return e;
}

// A 1-second trace whose numbers are known by construction.
std::filesystem::path write_known_trace(const TempDir& dir) {
  RecorderOptions options;
  options.path = dir / "known.db";
  options.device_names = {"a0", "e0"};
  // hardware: what the engine writes for a backend without a profile (cpu, cuda).
  options.metadata = {{"clock", "virtual"},
                      {"model", R"({"name":"tiny","experts":4})"},
                      {"policy", "async"},
                      {"hardware", "null"}};
  auto recorder = TraceRecorder::open(options);
  EXPECT_TRUE(recorder.ok()) << recorder.status().message();
  std::vector<Span> spans = {
      // a0: busy 600 ms in two executions of 10 and 30 rows, stalls 300 ms queue_empty + 100 ms barrier.
      compute(0, 400 * kMs, 0, SpanKind::Attention, 10),
      compute(400 * kMs, 700 * kMs, 0, SpanKind::Stall, 0, StallReason::QueueEmpty),
      compute(700 * kMs, 900 * kMs, 0, SpanKind::Expert, 30),
      compute(900 * kMs, 1000 * kMs, 0, SpanKind::Stall, 0, StallReason::Barrier),
      // e0: 250 ms busy, 500 ms waiting for a transfer; a send-lane span does not count as busy.
      compute(0, 250 * kMs, 1, SpanKind::Expert, 8),
      compute(250 * kMs, 750 * kMs, 1, SpanKind::Stall, 0, StallReason::Transfer),
  };
  Span send = compute(0, 900 * kMs, 1, SpanKind::Transfer, 8);
  send.lane = Lane::Send;
  send.peer = 0;
  spans.push_back(send);
  (*recorder)->add(spans);
  // Two requests: ttft 100 and 300 ms; request 1 made 11 tokens in 500 ms after its first.
  const std::vector<RequestEvent> requests = {
      request(0, 1, RequestPhase::Arrival, 0),           request(100 * kMs, 1, RequestPhase::FirstToken, 1),
      request(600 * kMs, 1, RequestPhase::Finished, 11), request(200 * kMs, 2, RequestPhase::Arrival, 0),
      request(500 * kMs, 2, RequestPhase::FirstToken, 1), request(900 * kMs, 2, RequestPhase::Rejected, 9),
  };
  (*recorder)->add(requests);
  QueueSample q;
  q.t_ns = 123'456'789;
  q.device = 1;
  q.layer = LayerKind::Expert;
  q.block = 1;
  q.index = 2;
  q.depth_tokens = 17;
  (*recorder)->add(std::span(&q, 1));
  // Block 1 of 4 experts: 300, 100, 100 and none for expert 3: mean 125, expert 0 is 2.4x it.
  std::vector<ExpertLoad> loads;
  for (auto [expert, tokens] : std::vector<std::pair<int, int>>{{0, 200}, {1, 100}, {2, 100}, {0, 100}}) {
    ExpertLoad l;
    l.window_start_ns = 0;
    l.window_end_ns = 1000 * kMs;
    l.block = 1;
    l.expert = expert;
    l.tokens = tokens;
    loads.push_back(l);
  }
  (*recorder)->add(loads);
  (*recorder)->add_json(Topic::Control, R"({"t_ns":500000000,"cmd":"set_policy","ok":true,"request":{"cmd":"set_policy"}})");
  (*recorder)->add_json(Topic::Summary, R"({"t_begin_ns":0,"t_end_ns":500000000,"tokens_per_s":10,"itl_ms":{"count":4,"p50":2.0,"p99":5.0}})");
  (*recorder)->add_json(Topic::Summary, R"({"t_begin_ns":500000000,"t_end_ns":1000000000,"tokens_per_s":12,"itl_ms":{"count":4,"p50":3.0,"p99":9.0}})");
  EXPECT_TRUE((*recorder)->stop().ok());
  return options.path;
}

TEST(LatencyStats, NearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  const LatencyStats s = latency_stats(v);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.p50, 50);
  EXPECT_DOUBLE_EQ(s.p90, 90);
  EXPECT_DOUBLE_EQ(s.p99, 99);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_EQ(latency_stats({}).count, 0u);
  EXPECT_DOUBLE_EQ(latency_stats({7}).p99, 7);
}

TEST(TraceSummary, NumbersOnKnownData) {
  TempDir dir;
  auto reader = TraceReader::open(write_known_trace(dir));
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto summary = summarize_trace(**reader, 3);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  const TraceSummary& s = *summary;
  EXPECT_EQ(s.start_ns, 0);
  EXPECT_EQ(s.end_ns, 1000 * kMs);
  ASSERT_EQ(s.devices.size(), 2u);
  const DeviceSummary& a0 = s.devices[0];
  EXPECT_EQ(a0.name, "a0");
  EXPECT_DOUBLE_EQ(a0.busy, 0.6);
  EXPECT_DOUBLE_EQ(a0.stall[static_cast<int>(StallReason::QueueEmpty)], 0.3);
  EXPECT_DOUBLE_EQ(a0.stall[static_cast<int>(StallReason::Barrier)], 0.1);
  EXPECT_EQ(a0.executions, 2);
  EXPECT_DOUBLE_EQ(a0.rows_per_execution, 20);
  const DeviceSummary& e0 = s.devices[1];
  EXPECT_DOUBLE_EQ(e0.busy, 0.25);
  EXPECT_DOUBLE_EQ(e0.stall[static_cast<int>(StallReason::Transfer)], 0.5);
  EXPECT_EQ(e0.executions, 1);
  EXPECT_DOUBLE_EQ(a0.host, 0);
  EXPECT_DOUBLE_EQ(e0.host, 0.25);
  // Where async loses: executions per second, transfers sent, the sampled μ-queues.
  EXPECT_DOUBLE_EQ(a0.executions_per_s, 2);
  EXPECT_EQ(a0.transfers, 0);
  EXPECT_EQ(e0.transfers, 1);
  EXPECT_DOUBLE_EQ(e0.rows_per_transfer, 8);
  ASSERT_EQ(s.queues.size(), 1u);
  EXPECT_EQ(s.queues[0].device, 1);
  EXPECT_EQ(s.queues[0].layer, LayerKind::Expert);
  EXPECT_EQ(s.queues[0].samples, 1);
  EXPECT_DOUBLE_EQ(s.queues[0].mean_depth_tokens, 17);

  EXPECT_EQ(s.requests_arrived, 2);
  EXPECT_EQ(s.requests_finished, 1);
  EXPECT_EQ(s.requests_rejected, 1);
  // Its summary windows carry no token count: the request events give it.
  EXPECT_EQ(s.token_windows, 0);
  EXPECT_EQ(s.tokens_generated, 20);
  EXPECT_DOUBLE_EQ(s.tokens_per_s, 20);
  EXPECT_DOUBLE_EQ(s.requests_per_s, 1);
  EXPECT_EQ(s.ttft_ms.count, 2u);
  EXPECT_DOUBLE_EQ(s.ttft_ms.p50, 100);
  EXPECT_DOUBLE_EQ(s.ttft_ms.max, 300);
  EXPECT_DOUBLE_EQ(s.ttft_ms.mean, 200);
  ASSERT_EQ(s.tpot_ms.count, 1u);
  EXPECT_DOUBLE_EQ(s.tpot_ms.p50, 50);
  ASSERT_EQ(s.e2e_ms.count, 1u);
  EXPECT_DOUBLE_EQ(s.e2e_ms.p99, 600);
  ASSERT_TRUE(s.itl_p50_median_ms && s.itl_p99_worst_ms);
  EXPECT_DOUBLE_EQ(*s.itl_p50_median_ms, 2.0);
  EXPECT_DOUBLE_EQ(*s.itl_p99_worst_ms, 9.0);

  ASSERT_EQ(s.skewed_experts.size(), 3u);
  EXPECT_EQ(s.skewed_experts[0].block, 1);
  EXPECT_EQ(s.skewed_experts[0].expert, 0);
  EXPECT_EQ(s.skewed_experts[0].tokens, 300);
  EXPECT_DOUBLE_EQ(s.skewed_experts[0].ratio_to_mean, 2.4);
  EXPECT_DOUBLE_EQ(s.skewed_experts[0].block_imbalance, 2.4);
  EXPECT_DOUBLE_EQ(s.skewed_experts[1].ratio_to_mean, 0.8);
  EXPECT_EQ(s.control_events, 1);

  const std::string text = format_trace_summary(s);
  EXPECT_NE(text.find("window: 1.000 s (0.000 to 1.000 s of run time, clock virtual)"), std::string::npos) << text;
  EXPECT_NE(text.find("model: tiny"), std::string::npos) << text;
  EXPECT_EQ(text.find("hardware"), std::string::npos) << text;  // none, not "null"
  EXPECT_NE(text.find("  a0             60.0%        30.0%    10.0%      0.0%     0.0%    0.0%           2       20.0         2"
                      "          0        0.0"),
            std::string::npos)
      << text;
  // e0 is neither busy nor stalled for the last quarter: host time.
  EXPECT_NE(text.find("  e0             25.0%         0.0%     0.0%     50.0%     0.0%   25.0%           1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("throughput: 20.0 tokens/s, 1.00 requests/s"), std::string::npos) << text;
  EXPECT_NE(text.find("  time to first token           2    200.00    100.00    300.00    300.00    300.00"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("median p50 2.00 ms, worst p99 9.00 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("       1       0        300     2.40            2.40"), std::string::npos) << text;
  EXPECT_NE(text.find("recording: complete"), std::string::npos) << text;
  EXPECT_NE(text.find("20 tokens generated (from request events"), std::string::npos) << text;
}

// Records one device's spans, requests and summary windows as a trace at dir/name, and
// summarizes it.
StatusOr<TraceSummary> summarize_recorded(const TempDir& dir, const char* name, const std::vector<Span>& spans,
                                          const std::vector<RequestEvent>& requests = {},
                                          const std::vector<const char*>& summaries = {}) {
  RecorderOptions options;
  options.path = dir / name;
  options.device_names = {"a0"};
  auto recorder = TraceRecorder::open(options);
  if (!recorder.ok()) return recorder.status();
  (*recorder)->add(spans);
  if (!requests.empty()) (*recorder)->add(requests);
  for (const char* summary : summaries) (*recorder)->add_json(Topic::Summary, summary);
  SY_RETURN_IF_ERROR((*recorder)->stop());
  auto reader = TraceReader::open(options.path);
  if (!reader.ok()) return reader.status();
  return summarize_trace(**reader);
}

// Executions as the engine's device table counts them: a token-pool merge and a findep shared
// expert are busy time over rows an attention or expert execution counted already.
// A recording whose writer was killed holds each device's spans up to its last committed block,
// while its request events run on: each device's fractions are of the time up to its own last
// span (e0's end at 750 ms), not of the whole window, where the lost time read as host time.
TEST(TraceSummary, AnIncompleteRecordingsDevicesAreMeasuredUpToTheirOwnSpans) {
  TempDir dir;
  const auto path = write_known_trace(dir);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, "UPDATE META SET value = '0' WHERE key = 'complete'", nullptr, nullptr, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_changes(db), 1);
    sqlite3_close(db);
  }
  auto reader = TraceReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto summary = summarize_trace(**reader, 3);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  const TraceSummary& s = *summary;
  EXPECT_EQ(s.end_ns, 1000 * kMs);
  EXPECT_EQ(s.devices_end_ns, 1000 * kMs);  // a0's spans run to the end
  const DeviceSummary& a0 = s.devices[0];
  EXPECT_DOUBLE_EQ(a0.busy, 0.6);
  const DeviceSummary& e0 = s.devices[1];
  EXPECT_DOUBLE_EQ(e0.busy, 250.0 / 750.0);
  EXPECT_DOUBLE_EQ(e0.stall[static_cast<int>(StallReason::Transfer)], 500.0 / 750.0);
  EXPECT_NEAR(e0.host, 0, 1e-12);
  EXPECT_NE(format_trace_summary(s).find("recording: incomplete"), std::string::npos);
}

TEST(TraceSummary, MergesAndSharedExpertsAreBusyButNoExecutions) {
  TempDir dir;
  auto summary = summarize_recorded(
      dir, "merges.db",
      {compute(0, 100 * kMs, 0, SpanKind::Attention, 10), compute(100 * kMs, 150 * kMs, 0, SpanKind::SharedExpert, 10),
       compute(150 * kMs, 200 * kMs, 0, SpanKind::Merge, 10), compute(200 * kMs, 250 * kMs, 0, SpanKind::Sampler, 2),
       compute(250 * kMs, 1000 * kMs, 0, SpanKind::Stall, 0, StallReason::QueueEmpty)});
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  ASSERT_EQ(summary->devices.size(), 1u);
  const DeviceSummary& d = summary->devices[0];
  EXPECT_DOUBLE_EQ(d.busy, 0.25);
  EXPECT_EQ(d.executions, 2);
  EXPECT_DOUBLE_EQ(d.rows_per_execution, 6);
}

// A recording that stops while its requests run: the request events know one token of each
// (their first), the engine's windows every token sampled.
TEST(TraceSummary, TokensComeFromTheEnginesWindowsWhenRecorded) {
  TempDir dir;
  auto summary = summarize_recorded(
      dir, "running.db", {compute(0, 1000 * kMs, 0, SpanKind::Attention, 12)},
      {request(0, 1, RequestPhase::Arrival, 0), request(100 * kMs, 1, RequestPhase::FirstToken, 1),
       request(0, 2, RequestPhase::Arrival, 0), request(200 * kMs, 2, RequestPhase::FirstToken, 1)},
      {R"({"t_begin_ns":0,"t_end_ns":500000000,"tokens_generated":30})",
       R"({"t_begin_ns":500000000,"t_end_ns":1000000000,"tokens_generated":50})"});
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->requests_arrived, 2);
  EXPECT_EQ(summary->requests_finished, 0);
  EXPECT_EQ(summary->token_windows, 2);
  EXPECT_EQ(summary->tokens_generated, 80);
  EXPECT_DOUBLE_EQ(summary->tokens_per_s, 80);
  const std::string text = format_trace_summary(*summary);
  EXPECT_NE(text.find("80 tokens generated (counted by the engine in 2 summary windows)"), std::string::npos) << text;
  EXPECT_NE(text.find("throughput: 80.0 tokens/s"), std::string::npos) << text;
}

// A post-mortem file may come from anywhere: a span block row whose count its bytes cannot hold
// (60 million records, under the reader's cap of 2^26 a block) is a named error in every tool
// that reads spans. Before, the decoder sized its output by the count first: 2.9 GB, zero-filled,
// for each such row, before finding the block corrupt.
TEST(TraceTools, ABlockRowLyingAboutItsCountIsAnErrorEverywhere) {
  TempDir dir;
  const auto path = write_known_trace(dir);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db, "UPDATE SPAN_BLOCKS SET count = 60000000", nullptr, nullptr, &error), SQLITE_OK)
        << (error ? error : "");
    sqlite3_free(error);
    EXPECT_GT(sqlite3_changes(db), 0);
    sqlite3_close(db);
  }
  auto reader = TraceReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  const auto spans = (*reader)->spans();
  ASSERT_FALSE(spans.ok());
  EXPECT_NE(spans.status().message().find("claims"), std::string::npos) << spans.status().message();
  EXPECT_FALSE(summarize_trace(**reader).ok());
  std::ostringstream chrome;
  EXPECT_FALSE(write_chrome_trace(**reader, chrome).ok());
}

TEST(ChromeTrace, ExportParsesAndHoldsTheEvents) {
  TempDir dir;
  auto reader = TraceReader::open(write_known_trace(dir));
  ASSERT_TRUE(reader.ok());
  const auto out = dir / "trace.json";
  ASSERT_TRUE(export_chrome_trace(**reader, out).ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "trace.json.tmp"));
  std::ifstream in(out);
  const json doc = json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["otherData"]["policy"], "async");
  const json& events = doc["traceEvents"];
  ASSERT_TRUE(events.is_array());

  int complete = 0, stalls = 0, counters = 0, instants = 0;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<int, std::string> process_names;
  for (const json& e : events) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++complete;
      if (e["name"].get<std::string>().starts_with("stall: ")) ++stalls;
    } else if (ph == "C") {
      ++counters;
    } else if (ph == "i") {
      ++instants;
      EXPECT_EQ(e["name"], "set_policy");
      EXPECT_EQ(e["ts"], 500000.0);
      EXPECT_EQ(e["args"]["ok"], true);
    } else if (ph == "M" && e["name"] == "thread_name") {
      thread_names[{e["pid"], e["tid"]}] = e["args"]["name"];
    } else if (ph == "M" && e["name"] == "process_name") {
      process_names[e["pid"]] = e["args"]["name"];
    }
  }
  EXPECT_EQ(complete, 8);  // 7 spans; the transfer also on its destination's receive lane
  EXPECT_EQ(stalls, 3);
  EXPECT_EQ(counters, 1 + 2);  // one queue sample; tokens_per_s of each of the two summary windows
  EXPECT_EQ(instants, 1);
  EXPECT_EQ(process_names[1], "a0 (device 0)");
  EXPECT_EQ(process_names[2], "e0 (device 1)");
  EXPECT_EQ((thread_names[{2, 1}]), "send");
  // The transfer e0 -> a0 (device 1 -> 0) appears on e0's send and a0's receive thread.
  int send = 0, receive = 0;
  for (const json& e : events) {
    if (e["ph"] != "X" || e["cat"] != "transfer") continue;
    if (e["pid"] == 2 && e["tid"] == 1 && e["args"]["peer"] == 0) ++send;
    if (e["pid"] == 1 && e["tid"] == 2 && e["args"]["peer"] == 1) ++receive;
  }
  EXPECT_EQ(send, 1);
  EXPECT_EQ(receive, 1);

  // The expert span of a0 in detail: µs timestamps, lane as thread, args.
  bool found = false;
  for (const json& e : events) {
    if (e["ph"] != "X" || e["pid"] != 1 || e["name"] != "expert") continue;
    found = true;
    EXPECT_EQ(e["tid"], 0);
    EXPECT_EQ(e["ts"], 700000.0);
    EXPECT_EQ(e["dur"], 200000.0);
    EXPECT_EQ(e["args"]["block"], 1);
    EXPECT_EQ(e["args"]["expert"], 2);
    EXPECT_EQ(e["args"]["tokens"], 30);
    EXPECT_EQ(e["args"]["microbatch"], -1);
  }
  EXPECT_TRUE(found);

  // Nanosecond precision survives in the decimals.
  std::ifstream raw(out);
  std::stringstream text;
  text << raw.rdbuf();
  EXPECT_NE(text.str().find("\"name\":\"queue b1 expert 2\",\"pid\":2,\"ts\":123456.789,\"args\":{\"tokens\":17}"),
            std::string::npos);

  const Status bad = export_chrome_trace(**reader, dir / "missing" / "x.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("x.json"), std::string::npos);
}

}  // namespace
}  // namespace sy::telemetry
