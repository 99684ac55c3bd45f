#include "synthetic_trace.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "telemetry/trace_recorder.h"

namespace sy::console::testing {

namespace {

using nlohmann::json;
using telemetry::Lane;
using telemetry::Span;
using telemetry::SpanKind;

constexpr int kAttention = 4, kExpertDevices = 4, kBlocks = 8, kExperts = 8;
constexpr std::int64_t kSecond = 1'000'000'000;

}  // namespace

StatusOr<SyntheticTraceCounts> write_synthetic_trace(const std::filesystem::path& path, int seconds) {
  json devices = json::array();
  std::vector<std::string> names;
  for (int d = 0; d < kAttention + kExpertDevices; ++d) {
    const std::string name = d < kAttention ? "a" + std::to_string(d) : "e" + std::to_string(d - kAttention);
    devices.push_back({{"index", d}, {"name", name}, {"rank", d < kAttention ? d : -1}, {"node", 0}});
    names.push_back(name);
  }
  json placement = json::array();
  for (int b = 0; b < kBlocks; ++b) {
    json experts = json::array();
    for (int e = 0; e < kExperts; ++e) experts.push_back(json::array({kAttention + e % kExpertDevices}));
    placement.push_back(experts);
  }
  telemetry::RecorderOptions options;
  options.path = path;
  options.overwrite = true;
  options.device_names = names;
  // One META key per field, JSON for structures, as the recorder documents.
  options.metadata = {
      {"schema_version", "1"},
      {"run_id", "77"},
      {"clock", "virtual"},
      {"backend", "sim"},
      {"hardware", "H100"},
      {"model", json{{"name", "synthetic-moe"}, {"arch", "mixtral"}, {"blocks", kBlocks}, {"experts", kExperts},
                     {"top_k", 2}, {"hidden_size", 1024}}
                    .dump()},
      {"devices", devices.dump()},
      {"placement", placement.dump()},
      {"policy", json{{"name", "async"}, {"scheduler", "defrag"}, {"lookahead", 3}, {"decay", 0.5}, {"microbatches", 2}}
                     .dump()},
  };
  auto recorder = telemetry::TraceRecorder::open(options);
  if (!recorder.ok()) return recorder.status();
  auto& rec = **recorder;

  SyntheticTraceCounts counts;
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<std::int64_t> exec(60'000, 400'000), gap(0, 120'000);
  const std::int64_t end = seconds * kSecond;
  std::vector<Span> spans;
  for (int d = 0; d < kAttention + kExpertDevices; ++d) {
    const bool attention = d < kAttention;
    std::int64_t t = 0;
    for (int i = 0; t < end; ++i) {
      const std::int64_t g = gap(rng);
      if (g > 60'000) {  // idle: a stall span with a reason
        Span s;
        s.device = d;
        s.kind = SpanKind::Stall;
        s.stall_reason = attention ? telemetry::StallReason::QueueEmpty
                                   : (i % 2 ? telemetry::StallReason::Barrier : telemetry::StallReason::Transfer);
        s.start_ns = t;
        s.end_ns = t + g;
        spans.push_back(s);
        t += g;
      }
      Span s;
      s.device = d;
      s.kind = attention ? SpanKind::Attention : SpanKind::Expert;
      s.block = i % kBlocks;
      s.index = attention ? d : (d - kAttention) + kExpertDevices * (i % 2);
      s.tokens = 8 + i % 120;
      s.start_ns = t;
      s.end_ns = t + exec(rng);
      spans.push_back(s);
      // Its output goes to a device of the other group.
      Span send = s;
      send.lane = Lane::Send;
      send.kind = SpanKind::Transfer;
      send.peer = attention ? kAttention + i % kExpertDevices : i % kAttention;
      send.start_ns = s.end_ns;
      send.end_ns = s.end_ns + 20'000 + (i % 7) * 3'000;
      spans.push_back(send);  // the destination's receive lane mirrors it
      t = s.end_ns;
    }
  }
  // In batches the writer's queue takes (it drops a batch beyond a million records waiting).
  auto add_all = [&](const auto& records) {
    constexpr std::size_t kBatch = 100'000;
    for (std::size_t i = 0; i < records.size(); i += kBatch) {
      rec.add(std::span(records).subspan(i, std::min(kBatch, records.size() - i)));
      if ((i / kBatch) % 5 == 4) (void)rec.flush();
    }
  };
  add_all(spans);
  counts.spans = spans.size();
  for (const Span& s : spans) counts.transfers += s.kind == SpanKind::Transfer ? 1 : 0;

  std::vector<telemetry::QueueSample> queues;
  for (std::int64_t t = 0; t < end; t += 5'000'000) {
    for (int d = 0; d < kAttention + kExpertDevices; ++d) {
      for (int b = 0; b < kBlocks; ++b) {
        telemetry::QueueSample q;
        q.t_ns = t;
        q.device = d;
        q.block = b;
        q.layer = d < kAttention ? telemetry::LayerKind::Attention : telemetry::LayerKind::Expert;
        q.index = d < kAttention ? d : d - kAttention;
        const double phase = static_cast<double>(t) / 2e8 + b * 0.7 + d;
        q.depth_tokens = static_cast<std::int64_t>(std::max(0.0, 40 * std::sin(phase) + (d >= kAttention ? 30 * (d - 3) : 10)));
        queues.push_back(q);
      }
    }
  }
  add_all(queues);
  counts.queue_samples = queues.size();

  std::vector<telemetry::ExpertLoad> loads;
  for (int w = 0; w < seconds; ++w) {
    for (int b = 0; b < kBlocks; ++b) {
      for (int e = 0; e < kExperts; ++e) {
        telemetry::ExpertLoad l;
        l.window_start_ns = w * kSecond;
        l.window_end_ns = (w + 1) * kSecond;
        l.block = b;
        l.expert = e;
        l.device = kAttention + e % kExpertDevices;
        l.tokens = static_cast<std::int64_t>(4000 * std::exp(-0.5 * ((e + b) % kExperts)));
        loads.push_back(l);
      }
    }
  }
  rec.add(std::span<const telemetry::ExpertLoad>(loads));
  counts.loads = loads.size();

  std::vector<telemetry::RequestEvent> requests;
  for (int r = 0; r < 60 * seconds; ++r) {
    const std::int64_t arrival = r * (kSecond / 60);
    auto event = [&](std::int64_t t, telemetry::RequestPhase phase, int out) {
      telemetry::RequestEvent e;
      e.t_ns = t;
      e.request_id = r;
      e.tokens_in = 40 + r % 30;
      e.tokens_out = out;
      e.rank = phase == telemetry::RequestPhase::Arrival ? -1 : r % kAttention;
      e.phase = phase;
      requests.push_back(e);
    };
    event(arrival, telemetry::RequestPhase::Arrival, 0);
    event(arrival + 2'000'000, telemetry::RequestPhase::Admitted, 0);
    event(arrival + 30'000'000, telemetry::RequestPhase::FirstToken, 1);
    if (arrival + 600'000'000 < end) event(arrival + 600'000'000, telemetry::RequestPhase::Finished, 80);
  }
  rec.add(std::span<const telemetry::RequestEvent>(requests));
  counts.request_events = requests.size();

  for (int w = 0; w < seconds; ++w) {
    json devs = json::array();
    for (int d = 0; d < kAttention + kExpertDevices; ++d)
      devs.push_back({{"device", d}, {"busy", 0.6 + 0.04 * d}, {"stall", {{"queue_empty", 0.2}, {"barrier", 0.1}, {"transfer", 0.05}, {"weights", 0}}},
                      {"executions", 3000}, {"rows_per_execution", 40.0}});
    const json summary = {{"t_begin_ns", w * kSecond}, {"t_end_ns", (w + 1) * kSecond}, {"tokens_per_s", 4000 + 500 * w},
                          {"requests_per_s", 60}, {"requests_finished", 50}, {"running", 30 + w}, {"waiting", 2},
                          {"itl_ms", {{"count", 4000}, {"mean", 20}, {"p50", 18}, {"p90", 30}, {"p99", 45 + w}}},
                          {"ttft_ms", {{"count", 60}, {"mean", 35}, {"p50", 30}, {"p90", 50}, {"p99", 80}}},
                          {"kv_usage", 0.4}, {"devices", devs}, {"expert_imbalance", json::array({2.5, 2.0, 1.5})},
                          {"dropped_events", 0}};
    rec.add_json(telemetry::Topic::Summary, summary.dump());
    ++counts.summaries;
  }
  const json control = {{"t_ns", end / 2},
                        {"cmd", "set_policy"},
                        {"request", {{"cmd", "set_policy"}, {"policy", "async"}, {"params", {{"scheduler", "mtfs"}}}}},
                        {"old", {{"name", "async"}, {"scheduler", "defrag"}}},
                        {"new", {{"name", "async"}, {"scheduler", "mtfs"}}},
                        {"ok", true},
                        {"error", nullptr}};
  rec.add_json(telemetry::Topic::Control, control.dump());
  counts.control_events = 1;
  counts.end_ns = end;
  auto st = rec.stop();
  if (!st.ok()) return st;
  return counts;
}

}  // namespace sy::console::testing
