#include <gtest/gtest.h>

#include "console/model/console_model.h"
#include "console/model/run_meta.h"
#include "console/model/summary_history.h"
#include "console/model/time_format.h"

namespace sy::console {
namespace {

using telemetry::Batch;
using telemetry::Topic;

constexpr const char* kMeta = R"({"schema_version":1,"run_id":123,"clock":"virtual","wall_origin_unix_ns":5,
  "pace":1.0,"now_ns":2000000000,"backend":"sim","hardware":"H100",
  "model":{"name":"mixtral-8x7b","arch":"mixtral","blocks":2,"experts":4,"top_k":2,"hidden_size":4096},
  "devices":[{"index":0,"name":"a0","rank":0,"node":0},{"index":1,"name":"e0","rank":-1,"node":0}],
  "placement":[[[1],[1],[1],[1]],[[1],[1],[1],[1]]],
  "policy":{"name":"async","scheduler":"defrag","lookahead":3,"decay":0.5,"microbatches":2},
  "admission_paused":false,"batching":{"max_batch_per_rank":64,"max_num_batched_tokens":2048},
  "recording":{"path":"/tmp/run.db","since_ns":10},
  "workload":{"rate":60.0,"skew":"exp:0.5","length_class":"short"},
  "rebalance":{"mode":"periodic","interval_s":5.0,"threshold":1.2,"algorithm":"eplb","min_gain":0.02},"row_bytes":8192})";

Batch json_batch(Topic topic, std::string array) {
  Batch b;
  b.topic = topic;
  b.json = std::move(array);
  return b;
}

TEST(ConsoleModel, IngestsEveryTopic) {
  ConsoleModel m;
  m.ingest(json_batch(Topic::Meta, std::string("[") + kMeta + "]"));
  ASSERT_TRUE(m.meta().has_value()) << m.last_error();
  EXPECT_EQ(m.meta()->model_name, "mixtral-8x7b");
  EXPECT_EQ(m.meta()->blocks, 2);
  EXPECT_EQ(m.meta()->device_name(1), "e0");
  EXPECT_EQ(m.meta()->device_name(7), "dev 7");
  EXPECT_EQ(m.meta()->policy.describe(), "async/defrag (lookahead 3, decay 0.5)");
  EXPECT_EQ(m.meta()->placement[1][3], (std::vector<std::int32_t>{1}));
  EXPECT_EQ(*m.meta()->recording_path, "/tmp/run.db");
  EXPECT_EQ(m.meta()->workload->skew, "exp:0.5");
  ASSERT_TRUE(m.meta()->rebalance.has_value());
  EXPECT_EQ(m.meta()->rebalance->algorithm, "eplb");
  EXPECT_EQ(m.meta()->rebalance->interval_s, 5.0);
  EXPECT_EQ(m.meta()->max_batch_per_rank, 64);
  EXPECT_EQ(m.meta()->max_num_batched_tokens, 2048);

  Batch spans;
  spans.topic = Topic::Spans;
  telemetry::Span s;
  s.device = 1;
  s.start_ns = 100;
  s.end_ns = 200;
  spans.spans = {s, s};
  m.ingest(spans);
  EXPECT_EQ(m.spans().size(), 2u);
  EXPECT_EQ(m.device_count(), 2);

  Batch queues;
  queues.topic = Topic::Queues;
  telemetry::QueueSample q;
  q.t_ns = 150;
  q.depth_tokens = 7;
  queues.queues = {q};
  m.ingest(queues);
  EXPECT_EQ(m.queues().queue_count(), 1u);

  Batch loads;
  loads.topic = Topic::ExpertLoad;
  telemetry::ExpertLoad l;
  l.window_end_ns = 1000;
  l.tokens = 4;
  loads.loads = {l};
  m.ingest(loads);
  EXPECT_EQ(m.loads().latest()->records.size(), 1u);

  Batch requests;
  requests.topic = Topic::Requests;
  telemetry::RequestEvent r;
  r.request_id = 9;
  r.t_ns = 10;
  r.phase = telemetry::RequestPhase::Arrival;
  requests.requests.push_back(r);
  r.t_ns = 60;
  r.phase = telemetry::RequestPhase::FirstToken;
  requests.requests.push_back(r);
  m.ingest(requests);
  ASSERT_EQ(m.requests().size(), 1u);
  EXPECT_EQ(m.requests().rows().at(9).ttft_ns(), 50);

  m.ingest(json_batch(Topic::Summary, R"([{"t_begin_ns":0,"t_end_ns":1000000000,"tokens_per_s":1500.5,
      "requests_per_s":12,"requests_finished":12,"running":30,"waiting":2,
      "itl_ms":{"count":100,"mean":20,"p50":19,"p90":30,"p99":45},"ttft_ms":{"count":12,"mean":80,"p50":70,"p90":120,"p99":150},
      "kv_usage":0.42,"devices":[{"device":0,"busy":0.8,"stall":{"queue_empty":0.1,"barrier":0.05,"transfer":0.05,"weights":0},
      "executions":100,"rows_per_execution":12.5}],"expert_imbalance":[1.5,2.0],"dropped_events":0}])"));
  ASSERT_EQ(m.summaries().points().size(), 1u) << m.last_error();
  const SummaryPoint& p = *m.summaries().latest();
  EXPECT_DOUBLE_EQ(p.tokens_per_s, 1500.5);
  EXPECT_DOUBLE_EQ(p.itl_ms.p99, 45);
  EXPECT_DOUBLE_EQ(p.devices[0].stall_barrier, 0.05);
  EXPECT_EQ(p.expert_imbalance.size(), 2u);

  m.ingest(json_batch(Topic::Control, R"([{"t_ns":500,"cmd":"set_policy","request":{"cmd":"set_policy","policy":"pingpong"},
      "old":{"name":"async","scheduler":"defrag"},"new":{"name":"pingpong"},"ok":true,"error":null}])"));
  ASSERT_EQ(m.control_events().size(), 1u);
  EXPECT_EQ(m.control_events()[0].label(), "set_policy: async/defrag -> pingpong");
  // A move that copies weights first: accepted, then switched in.
  m.ingest(json_batch(Topic::Control, R"([{"t_ns":600,"cmd":"move_expert","request":{"cmd":"move_expert"},
      "old":[{"block":1,"devices":[3]}],"new":[{"block":1,"devices":[5]}],"ok":true,"error":null,"phase":"copying",
      "copies":[{"block":1,"expert":1,"from":3,"to":5,"bytes":98304,"started_ns":600}]},
      {"t_ns":900,"cmd":"move_expert","request":{"cmd":"move_expert"},"old":[{"block":1,"devices":[3]}],
      "new":[{"block":1,"devices":[5]}],"ok":true,"error":null,"phase":"applied","applied_at_ns":900}])"));
  ASSERT_EQ(m.control_events().size(), 3u);
  EXPECT_EQ(m.control_events()[1].label(),
            R"(move_expert (copying weights): [{"block":1,"devices":[3]}] -> [{"block":1,"devices":[5]}])");
  EXPECT_EQ(m.control_events()[2].label(), R"(move_expert (applied): [{"block":1,"devices":[3]}] -> [{"block":1,"devices":[5]}])");
  EXPECT_EQ(m.bad_messages(), 0u);
  EXPECT_EQ(m.begin_ns(), 10);
  EXPECT_EQ(m.end_ns(), 2'000'000'000);
}

// A deployment across processes: which process runs each device, a dead one with its reason,
// and the clock offsets; the `rank_lost` control event reads as what happened.
TEST(ConsoleModel, FindepPolicyShowsItsChunksAndOrder) {
  std::string meta = kMeta;
  const std::string async = R"("policy":{"name":"async","scheduler":"defrag","lookahead":3,"decay":0.5,"microbatches":2})";
  ASSERT_NE(meta.find(async), std::string::npos);
  meta.replace(meta.find(async), async.size(),
               R"("policy":{"name":"findep","scheduler":"defrag","lookahead":3,"decay":0.5,"microbatches":2,)"
               R"("expert_chunks":3,"order":"aass"})");
  ConsoleModel m;
  m.ingest(json_batch(Topic::Meta, "[" + meta + "]"));
  ASSERT_TRUE(m.meta().has_value()) << m.last_error();
  EXPECT_EQ(m.meta()->policy.expert_chunks, 3);
  EXPECT_EQ(m.meta()->policy.order, "aass");
  EXPECT_EQ(m.meta()->policy.describe(), "findep (r1=2, r2=3, AASS)");
}

// Lookahead 0 is an engine value (the control panel must show it), told apart from a
// metadata that does not report one.
TEST(ConsoleModel, LookaheadZeroIsReadAndAMissingOneIsNot) {
  std::string meta = kMeta;
  const std::string three = R"("lookahead":3,)";
  ASSERT_NE(meta.find(three), std::string::npos);
  meta.replace(meta.find(three), three.size(), R"("lookahead":0,)");
  auto zero = parse_run_meta(meta);
  ASSERT_TRUE(zero.ok()) << zero.status().message();
  EXPECT_EQ(zero->policy.lookahead, 0);
  EXPECT_EQ(zero->policy.describe(), "async/defrag (lookahead 0, decay 0.5)");
  meta.replace(meta.find(R"("lookahead":0,)"), std::string(R"("lookahead":0,)").size(), "");
  auto missing = parse_run_meta(meta);
  ASSERT_TRUE(missing.ok()) << missing.status().message();
  EXPECT_LT(missing->policy.lookahead, 0);
  EXPECT_EQ(missing->policy.describe(), "async/defrag");
}

// Under the adaptive policy the run says so beside the policy it chose; sync names an ideal
// barrier (the collective one is the default), and only pingpong names its micro-batches.
TEST(ConsoleModel, AdaptivePolicyAndSyncBarrierRead) {
  std::string meta = kMeta;
  const std::string async = R"("policy":{"name":"async","scheduler":"defrag","lookahead":3,"decay":0.5,"microbatches":2})";
  ASSERT_NE(meta.find(async), std::string::npos);
  const auto with_policy = [&](const std::string& policy) {
    std::string m = meta;
    m.replace(m.find(async), async.size(), policy);
    ConsoleModel model;
    model.ingest(json_batch(Topic::Meta, "[" + m + "]"));
    EXPECT_TRUE(model.meta().has_value()) << model.last_error();
    return model.meta() ? model.meta()->policy : PolicyInfo{};
  };
  const PolicyInfo adaptive = with_policy(
      R"("policy":{"name":"sync","scheduler":"defrag","microbatches":2,"barrier":"collective","adaptive":true})");
  EXPECT_TRUE(adaptive.adaptive);
  EXPECT_EQ(adaptive.describe(), "adaptive, now sync");
  const PolicyInfo ideal = with_policy(R"("policy":{"name":"sync","microbatches":2,"barrier":"ideal","adaptive":false})");
  EXPECT_FALSE(ideal.adaptive);
  EXPECT_EQ(ideal.barrier, "ideal");
  EXPECT_EQ(ideal.describe(), "sync (ideal barrier)");
  EXPECT_EQ(with_policy(R"("policy":{"name":"pingpong","microbatches":3})").describe(), "pingpong (m=3)");
}

TEST(ConsoleModel, ProcessesOfADeploymentAcrossRanksAndALostOne) {
  ConsoleModel m;
  m.ingest(json_batch(Topic::Meta, R"json([{"schema_version":1,"run_id":7,"clock":"wall","backend":"cpu",
      "devices":[{"index":0,"name":"a0","rank":0,"node":0,"process":0},{"index":1,"name":"e0","rank":-1,"node":0,"process":1},
                 {"index":2,"name":"e1","rank":-1,"node":0,"process":2}],
      "processes":[{"rank":0,"state":"alive","reason":null,"devices":[0],"clock_offset_us":0.0,"clock_error_us":0.0},
                   {"rank":1,"state":"alive","reason":null,"devices":[1],"clock_offset_us":838.4,"clock_error_us":59.7},
                   {"rank":2,"state":"dead","reason":"rank 2 stopped answering (no heartbeat for 610 ms)","devices":[2],
                    "clock_offset_us":null,"clock_error_us":null}]}])json"));
  ASSERT_TRUE(m.meta()) << m.last_error();
  const RunMeta& meta = *m.meta();
  ASSERT_EQ(meta.processes.size(), 3u);
  ASSERT_NE(meta.process_of(1), nullptr);
  EXPECT_EQ(meta.process_of(1)->rank, 1);
  EXPECT_FALSE(meta.process_of(1)->dead);
  EXPECT_DOUBLE_EQ(*meta.process_of(1)->clock_offset_us, 838.4);
  EXPECT_DOUBLE_EQ(*meta.process_of(1)->clock_error_us, 59.7);
  ASSERT_NE(meta.process_of(2), nullptr);
  EXPECT_TRUE(meta.process_of(2)->dead);
  EXPECT_EQ(meta.process_of(2)->reason, "rank 2 stopped answering (no heartbeat for 610 ms)");
  EXPECT_FALSE(meta.process_of(2)->clock_offset_us.has_value());
  EXPECT_EQ(meta.process_of(7), nullptr);

  m.ingest(json_batch(Topic::Control, R"json([{"t_ns":900,"cmd":"rank_lost","request":null,"old":{"rank":2,"state":"alive"},
      "new":{"rank":2,"state":"dead"},"ok":true,"rank":2,"reason":"rank 2 stopped answering (no heartbeat for 610 ms)"}])json"));
  ASSERT_EQ(m.control_events().size(), 1u);
  EXPECT_EQ(m.control_events()[0].label(), "process lost: rank 2 stopped answering (no heartbeat for 610 ms)");
  EXPECT_EQ(m.bad_messages(), 0u);

  // The adaptive policy's switches read as what it chose and why.
  m.ingest(json_batch(Topic::Control, R"json([{"t_ns":950,"cmd":"adaptive_switch","request":null,"old":{"name":"sync"},
      "new":{"name":"async"},"ok":true,"error":null,"reason":"offered 5210 tok/s per attention rank >= 4600"}])json"));
  ASSERT_EQ(m.control_events().size(), 2u);
  EXPECT_EQ(m.control_events()[1].label(), "adaptive: sync -> async (offered 5210 tok/s per attention rank >= 4600)");
}

TEST(ConsoleModel, BadJsonIsCountedAndNamedNotFatal) {
  ConsoleModel m;
  m.ingest(json_batch(Topic::Meta, "not json"));
  EXPECT_EQ(m.bad_messages(), 1u);
  EXPECT_NE(m.last_error().find("meta"), std::string::npos);
  m.ingest(json_batch(Topic::Meta, R"([{"model":{"blocks":"many"}}])"));
  EXPECT_EQ(m.bad_messages(), 2u);
  EXPECT_NE(m.last_error().find("blocks"), std::string::npos) << m.last_error();
  m.ingest(json_batch(Topic::Summary, R"([{"t_begin_ns":5,"t_end_ns":1}, {"t_begin_ns":0,"t_end_ns":"x"}])"));
  EXPECT_EQ(m.bad_messages(), 4u);
  m.ingest(json_batch(Topic::Control, R"([{"cmd":"pause"}])"));
  EXPECT_EQ(m.bad_messages(), 5u);
  EXPECT_NE(m.last_error().find("t_ns"), std::string::npos);
  EXPECT_FALSE(m.meta().has_value());
}

TEST(ConsoleModel, RetentionBoundsALiveRunButNotATrace) {
  ConsoleModel m;
  m.set_retention({1000, 1'000'000});
  telemetry::Span s;
  for (int i = 0; i < 100; ++i) {
    s.start_ns = i * 100;
    s.end_ns = i * 100 + 50;
    m.add_span(s);
  }
  m.apply_retention();
  EXPECT_EQ(m.spans().size(), 11u);  // those ending at or after 9950 - 1000: i = 89..99
  EXPECT_EQ(m.spans().begin_ns(), 8900);
  // The run's start stays: what retention dropped is still there at reduced detail.
  EXPECT_EQ(m.begin_ns(), 0);
  const WindowSeries* coarse = m.spans().history().coarse(0, telemetry::Lane::Compute);
  ASSERT_NE(coarse, nullptr);
  EXPECT_EQ(coarse->begin_ns(), 0);
  EXPECT_EQ((*coarse)[0].spans, 100);
  EXPECT_EQ((*coarse)[0].busy_ns(), 100 * 50);

  ConsoleModel trace;
  trace.set_bounded(false);
  trace.set_retention({1000, 10});
  for (int i = 0; i < 100; ++i) {
    s.start_ns = i * 100;
    s.end_ns = i * 100 + 50;
    trace.add_span(s);
  }
  trace.apply_retention();
  EXPECT_EQ(trace.spans().size(), 100u);
}

// The header says what the timeline holds and which limit decides it, not the limits alone.
TEST(ConsoleModel, DescribesWhatItHoldsAndWhichLimitDecides) {
  telemetry::Span s;
  ConsoleModel by_time;
  by_time.set_retention({1'000'000'000, 1'000'000});
  for (int i = 0; i < 300; ++i) {
    s.start_ns = std::int64_t{i} * 10'000'000;
    s.end_ns = s.start_ns + 5'000'000;
    by_time.add_span(s);
  }
  by_time.apply_retention();
  const std::string t = by_time.describe_held();
  EXPECT_NE(t.find(format_count(static_cast<double>(by_time.spans().size())) + " spans over the last "), std::string::npos) << t;
  EXPECT_NE(t.find("kept up to " + format_duration(std::int64_t{1'000'000'000})), std::string::npos) << t;
  EXPECT_NE(t.find("dropped so far"), std::string::npos) << t;

  ConsoleModel by_count;
  by_count.set_retention({120'000'000'000, 100});
  for (int i = 0; i < 300; ++i) {
    s.start_ns = std::int64_t{i} * 10'000'000;
    s.end_ns = s.start_ns + 5'000'000;
    by_count.add_span(s);
  }
  by_count.apply_retention();
  const std::string c = by_count.describe_held();
  EXPECT_NE(c.find("the 100-span limit, reached before " + format_duration(std::int64_t{120'000'000'000})),
            std::string::npos) << c;

  ConsoleModel trace;
  trace.set_bounded(false);
  trace.add_span(s);
  EXPECT_EQ(trace.describe_held(), "1 spans, whole recording");
}

TEST(SummaryLine, ALatencyNoRequestMeasuredReadsAsUnknownNotZero) {
  SummaryPoint p;
  p.tokens_per_s = 1200;
  p.itl_ms.count = 40;
  p.itl_ms.p50 = 1.5;
  p.itl_ms.p99 = 3.25;
  const std::string line = describe_summary(p);
  EXPECT_NE(line.find("ITL p50 1.50 p99 3.25 ms"), std::string::npos) << line;
  EXPECT_NE(line.find("TTFT p50 - ms"), std::string::npos) << line;
  p.ttft_ms.count = 2;
  p.ttft_ms.p50 = 12.0;
  EXPECT_NE(describe_summary(p).find("TTFT p50 12.0 ms"), std::string::npos);
}

// The summary's prefix_cache object: read, added up when windows fold, shown as a hit rate in
// the line only where a prefix cache admitted something.
TEST(SummaryLine, PrefixCacheHitRateWhereACacheServed) {
  auto p = parse_summary(R"({"t_begin_ns":0,"t_end_ns":500000000,"prefix_cache":{"queries":400,"hits":300}})");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->prefix_queries, 400);
  EXPECT_EQ(p->prefix_hits, 300);
  EXPECT_DOUBLE_EQ(p->prefix_hit_rate(), 0.75);
  EXPECT_NE(describe_summary(*p).find("prefix cache 75%"), std::string::npos) << describe_summary(*p);
  auto q = parse_summary(R"({"t_begin_ns":500000000,"t_end_ns":1000000000,"prefix_cache":{"queries":100,"hits":0}})");
  ASSERT_TRUE(q.ok());
  fold_summary(*p, *q);
  EXPECT_EQ(p->prefix_queries, 500);
  EXPECT_DOUBLE_EQ(p->prefix_hit_rate(), 0.6);
  // Summaries without one (older recordings, no --prefix-caching) say nothing of it.
  auto none = parse_summary(R"({"t_begin_ns":0,"t_end_ns":1})");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(describe_summary(*none).find("prefix"), std::string::npos);
  EXPECT_FALSE(parse_summary(R"({"t_begin_ns":0,"t_end_ns":1,"prefix_cache":3})").ok());
}

TEST(ConsoleModel, ClearForgetsTheRun) {
  ConsoleModel m;
  m.ingest(json_batch(Topic::Meta, std::string("[") + kMeta + "]"));
  telemetry::Span s;
  m.add_span(s);
  m.clear();
  EXPECT_FALSE(m.meta().has_value());
  EXPECT_TRUE(m.spans().empty());
  EXPECT_EQ(m.end_ns(), 0);
}

TEST(TimeFormat, UnitsFitTheMagnitude) {
  EXPECT_EQ(format_duration(std::int64_t{500}), "500 ns");
  EXPECT_EQ(format_duration(std::int64_t{1500}), "1.5 us");
  EXPECT_EQ(format_duration(std::int64_t{2'500'000}), "2.5 ms");
  EXPECT_EQ(format_duration(std::int64_t{3'000'000'000}), "3 s");
  EXPECT_EQ(format_duration(std::int64_t{125'000'000'000}), "2m 05s");
  EXPECT_EQ(format_time(1'234'567'891, 1000), "1.234568 s");
  EXPECT_EQ(format_time(1'234'567'891, 1'000'000'000), "1 s");
  EXPECT_EQ(format_count(1'200'000), "1.2M");
}

}  // namespace
}  // namespace sy::console
