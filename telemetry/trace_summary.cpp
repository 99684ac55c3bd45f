#include "telemetry/trace_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>

#include <nlohmann/json.hpp>

#include "telemetry/host_share.h"

namespace sy::telemetry {

LatencyStats latency_stats(std::vector<double> v) {
  LatencyStats s;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::clamp<std::size_t>(k, 1, v.size()) - 1];
  };
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.p50 = rank(0.50);
  s.p90 = rank(0.90);
  s.p99 = rank(0.99);
  s.max = v.back();
  return s;
}

StatusOr<TraceSummary> summarize_trace(const TraceReader& trace, int top_experts) {
  TraceSummary out;
  out.start_ns = trace.start_ns();
  out.end_ns = trace.end_ns();
  out.metadata = trace.metadata();
  const double window_ns = static_cast<double>(std::max<std::int64_t>(out.end_ns - out.start_ns, 1));
  auto spans = trace.spans();
  if (!spans.ok()) return spans.status();
  // An incomplete recording's spans stop at its last committed block while its request events
  // (smaller, written sooner) run on: time past the spans would read as host time.
  // Blocks are committed per device, so each device's spans end on their own: each device's
  // fractions are of the time up to its last span.
  out.devices_end_ns = out.end_ns;
  std::map<std::int32_t, std::int64_t> device_end;  // incomplete recordings only
  if (!recording_complete(out.metadata)) {
    std::int64_t spans_end = out.start_ns;
    for (const Span& s : *spans) {
      if (s.lane != Lane::Compute) continue;
      std::int64_t& e = device_end.try_emplace(s.device, out.start_ns).first->second;
      e = std::max(e, std::min(s.end_ns, out.end_ns));
      spans_end = std::max(spans_end, e);
    }
    out.devices_end_ns = std::min(out.end_ns, spans_end);
  }
  const auto end_of = [&](std::int32_t device) {
    const auto it = device_end.find(device);
    return it == device_end.end() ? out.devices_end_ns : it->second;
  };

  // Devices: busy and stall time on the compute lane, clipped to the window.
  const std::vector<std::string> names = trace.device_names();
  std::map<std::int32_t, DeviceSummary> devices;
  for (std::size_t i = 0; i < names.size(); ++i) {
    DeviceSummary& d = devices[static_cast<std::int32_t>(i)];
    d.device = static_cast<std::int32_t>(i);
    d.name = names[i];
  }
  std::map<std::int32_t, std::int64_t> rows, carried;
  for (const Span& s : *spans) {
    if (s.kind == SpanKind::Transfer && s.lane == Lane::Send && s.start_ns >= out.start_ns && s.start_ns < end_of(s.device)) {
      DeviceSummary& d = devices[s.device];
      d.device = s.device;
      ++d.transfers;
      carried[s.device] += s.tokens;
    }
    if (s.lane != Lane::Compute) continue;
    DeviceSummary& d = devices[s.device];
    d.device = s.device;
    const double dur = static_cast<double>(std::min(s.end_ns, end_of(s.device)) - std::max(s.start_ns, out.start_ns));
    if (dur <= 0) continue;
    if (s.kind == SpanKind::Stall) {
      const auto r = static_cast<std::size_t>(s.stall_reason);
      if (r < d.stall.size()) d.stall[r] += dur;
    } else {
      d.busy += dur;
      // Executions as the engine's device table counts them: a token-pool merge and a findep
      // shared expert are busy time over rows an execution already counted.
      if (s.kind == SpanKind::Attention || s.kind == SpanKind::Expert || s.kind == SpanKind::Sampler) {
        ++d.executions;
        rows[s.device] += s.tokens;
      }
    }
  }
  for (auto& [index, d] : devices) {
    if (d.name.empty()) d.name = "device" + std::to_string(index);
    const double devices_window_ns = static_cast<double>(std::max<std::int64_t>(end_of(index) - out.start_ns, 1));
    d.busy /= devices_window_ns;
    for (double& x : d.stall) x /= devices_window_ns;
    double accounted = d.busy;
    for (double x : d.stall) accounted += x;
    d.host = host_share(accounted);
    d.rows_per_execution = d.executions > 0 ? static_cast<double>(rows[index]) / static_cast<double>(d.executions) : 0;
    d.executions_per_s = static_cast<double>(d.executions) / (devices_window_ns / 1e9);
    d.rows_per_transfer = d.transfers > 0 ? static_cast<double>(carried[index]) / static_cast<double>(d.transfers) : 0;
    out.devices.push_back(d);
  }

  // μ-queues: the samples that found a queue non-empty, per device and layer kind.
  auto samples = trace.queue_samples();
  if (!samples.ok()) return samples.status();
  std::map<std::pair<std::int32_t, int>, QueueSummary> queues;
  for (const QueueSample& q : *samples) {
    if (q.depth_tokens <= 0) continue;
    QueueSummary& s = queues[{q.device, static_cast<int>(q.layer)}];
    s.device = q.device;
    s.layer = q.layer;
    ++s.samples;
    s.mean_depth_tokens += static_cast<double>(q.depth_tokens);
    const double age_ms = static_cast<double>(q.oldest_age_ns) / 1e6;
    s.mean_oldest_age_ms += age_ms;
    s.max_oldest_age_ms = std::max(s.max_oldest_age_ms, age_ms);
  }
  for (auto& [key, s] : queues) {
    s.mean_depth_tokens /= static_cast<double>(s.samples);
    s.mean_oldest_age_ms /= static_cast<double>(s.samples);
    out.queues.push_back(s);
  }

  // Requests: lifecycle times per request id.
  auto requests = trace.requests();
  if (!requests.ok()) return requests.status();
  struct Life {
    std::optional<std::int64_t> arrival, first, finished;
    std::int32_t tokens_out = 0;
  };
  std::map<std::int64_t, Life> lives;
  for (const RequestEvent& e : *requests) {
    Life& l = lives[e.request_id];
    l.tokens_out = std::max(l.tokens_out, e.tokens_out);
    switch (e.phase) {
      case RequestPhase::Arrival: l.arrival = e.t_ns; ++out.requests_arrived; break;
      case RequestPhase::FirstToken: l.first = e.t_ns; break;
      case RequestPhase::Finished: l.finished = e.t_ns; ++out.requests_finished; break;
      case RequestPhase::Rejected: ++out.requests_rejected; break;
      default: break;
    }
  }
  std::vector<double> ttft, tpot, e2e;
  for (const auto& [id, l] : lives) {
    out.tokens_generated += l.tokens_out;
    if (l.arrival && l.first) ttft.push_back(static_cast<double>(*l.first - *l.arrival) / 1e6);
    if (l.arrival && l.finished) e2e.push_back(static_cast<double>(*l.finished - *l.arrival) / 1e6);
    if (l.first && l.finished && l.tokens_out > 1) {
      tpot.push_back(static_cast<double>(*l.finished - *l.first) / 1e6 / (l.tokens_out - 1));
    }
  }
  out.ttft_ms = latency_stats(std::move(ttft));
  out.tpot_ms = latency_stats(std::move(tpot));
  out.e2e_ms = latency_stats(std::move(e2e));
  out.requests_per_s = static_cast<double>(out.requests_finished) / (window_ns / 1e9);

  // Window summaries: the engine's own ITL percentiles (not mergeable; reported as a range).
  auto summaries = trace.summaries();
  if (!summaries.ok()) return summaries.status();
  out.summary_windows = static_cast<std::int64_t>(summaries->size());
  std::vector<double> p50s;
  // Tokens: the engine counts every token it samples in its windows (which lie inside the
  // trace: they count in its bounds), where the request events carry a request's count only at
  // its first token and at its end: a recording that stops while requests run would miss all
  // but their first token.
  std::int64_t window_tokens = 0;
  for (const std::string& text : *summaries) {
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_object() && doc.contains("tokens_generated") && doc["tokens_generated"].is_number_integer()) {
      window_tokens += doc["tokens_generated"].get<std::int64_t>();
      ++out.token_windows;
    }
    if (!doc.is_object() || !doc.contains("itl_ms") || !doc["itl_ms"].is_object()) continue;
    const auto& itl = doc["itl_ms"];
    if (itl.contains("count") && itl["count"].is_number() && itl["count"].get<double>() <= 0) continue;
    if (itl.contains("p50") && itl["p50"].is_number()) p50s.push_back(itl["p50"].get<double>());
    if (itl.contains("p99") && itl["p99"].is_number()) {
      out.itl_p99_worst_ms = std::max(out.itl_p99_worst_ms.value_or(0.0), itl["p99"].get<double>());
    }
  }
  if (!p50s.empty()) out.itl_p50_median_ms = latency_stats(p50s).p50;
  if (out.token_windows > 0) out.tokens_generated = window_tokens;
  out.tokens_per_s = static_cast<double>(out.tokens_generated) / (window_ns / 1e9);

  auto control = trace.control_events();
  if (!control.ok()) return control.status();
  out.control_events = static_cast<std::int64_t>(control->size());

  // Expert load: tokens per (block, expert) over the whole trace, against the block's mean.
  auto loads = trace.expert_load();
  if (!loads.ok()) return loads.status();
  std::map<std::int32_t, std::map<std::int32_t, std::int64_t>> per_block;
  for (const ExpertLoad& l : *loads) per_block[l.block][l.expert] += l.tokens;
  std::int64_t model_experts = 0;
  if (auto it = out.metadata.find("model"); it != out.metadata.end()) {
    const auto doc = nlohmann::json::parse(it->second, nullptr, false);
    if (doc.is_object() && doc.contains("experts") && doc["experts"].is_number_integer()) {
      model_experts = doc["experts"].get<std::int64_t>();
    }
  }
  std::vector<ExpertSkew> skews;
  for (const auto& [block, experts] : per_block) {
    std::int64_t total = 0, max_tokens = 0;
    std::int32_t max_id = 0;
    for (const auto& [e, t] : experts) {
      total += t;
      max_tokens = std::max(max_tokens, t);
      max_id = std::max(max_id, e);
    }
    // Experts that got nothing may never appear in the records; the model's count includes them.
    const auto count = std::max<std::int64_t>(model_experts, max_id + 1);
    const double mean = static_cast<double>(total) / static_cast<double>(count);
    if (mean <= 0) continue;
    for (const auto& [e, t] : experts) {
      skews.push_back({block, e, t, static_cast<double>(t) / mean, static_cast<double>(max_tokens) / mean});
    }
  }
  std::stable_sort(skews.begin(), skews.end(),
                   [](const ExpertSkew& a, const ExpertSkew& b) { return a.ratio_to_mean > b.ratio_to_mean; });
  if (skews.size() > static_cast<std::size_t>(std::max(top_experts, 0))) skews.resize(static_cast<std::size_t>(top_experts));
  out.skewed_experts = std::move(skews);
  return out;
}

namespace {

std::string fmt(const char* format, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

std::string meta_text(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

}  // namespace

std::string format_trace_summary(const TraceSummary& s) {
  std::string out;
  const double seconds = static_cast<double>(s.end_ns - s.start_ns) / 1e9;
  const std::string clock = meta_text(s.metadata, "clock");
  out += fmt("window: %.3f s (%.3f to %.3f s of run time%s%s)\n", seconds, static_cast<double>(s.start_ns) / 1e9,
             static_cast<double>(s.end_ns) / 1e9, clock.empty() ? "" : ", clock ", clock.c_str());
  for (const char* key : {"run_id", "backend", "hardware", "policy"}) {
    const std::string v = meta_text(s.metadata, key);
    if (!v.empty() && v != "null") out += fmt("%s: %s\n", key, v.c_str());  // null: the run has none
  }
  if (auto model = nlohmann::json::parse(meta_text(s.metadata, "model"), nullptr, false);
      model.is_object() && model.contains("name") && model["name"].is_string()) {
    out += fmt("model: %s\n", model["name"].get<std::string>().c_str());
  }
  // Across processes: each rank's devices, state and the clock offset its events were moved by.
  if (auto processes = nlohmann::json::parse(meta_text(s.metadata, "processes"), nullptr, false);
      processes.is_array() && !processes.empty()) {
    out += fmt("processes: %zu\n", processes.size());
    for (const auto& p : processes) {
      if (!p.is_object()) continue;
      const bool dead = p.value("state", "") == "dead";
      std::string line = fmt("  rank %d: %zu device(s), %s", p.value("rank", -1),
                             p.contains("devices") && p["devices"].is_array() ? p["devices"].size() : std::size_t{0},
                             dead ? "dead" : "alive");
      if (dead && p.contains("reason") && p["reason"].is_string()) line += " (" + p["reason"].get<std::string>() + ")";
      if (p.contains("clock_offset_us") && p["clock_offset_us"].is_number() && p.contains("clock_error_us") &&
          p["clock_error_us"].is_number()) {
        line += fmt(", clock offset to rank 0 %+.1f us, residual error under %.1f us",
                    p["clock_offset_us"].get<double>(), p["clock_error_us"].get<double>());
      } else {
        line += ", clock offset not measured";
      }
      out += line + "\n";
    }
  }
  out += recording_complete(s.metadata) ? "recording: complete\n"
                         : "recording: incomplete (still being written, or its writer was killed)\n";
  const std::string dropped = meta_text(s.metadata, "records_dropped");
  if (!dropped.empty() && dropped != "0") out += "recording dropped " + dropped + " records (writer behind)\n";

  if (s.devices_end_ns < s.end_ns) {
    out += fmt("\ndevices (fraction of the time up to each device's last recorded span, at most %.3f s)\n",
               static_cast<double>(s.devices_end_ns) / 1e9);
  } else {
    out += "\ndevices (fraction of the window)\n";
  }
  out += fmt("  %-12s %7s %12s %8s %9s %8s %7s %11s %10s %9s %10s %10s\n", "device", "busy", "queue_empty", "barrier",
             "transfer", "weights", "host", "executions", "rows/exec", "exec/s", "transfers", "rows/xfer");
  for (const DeviceSummary& d : s.devices) {
    out += fmt("  %-12s %6.1f%% %11.1f%% %7.1f%% %8.1f%% %7.1f%% %6.1f%% %11lld %10.1f %9.0f %10lld %10.1f\n",
               d.name.c_str(), 100 * d.busy, 100 * d.stall[1], 100 * d.stall[2], 100 * d.stall[3], 100 * d.stall[4],
               100 * d.host,
               static_cast<long long>(d.executions), d.rows_per_execution, d.executions_per_s,
               static_cast<long long>(d.transfers), d.rows_per_transfer);
  }
  if (!s.queues.empty()) {
    out += "\nμ-queues (sampled; only samples that found rows waiting)\n";
    out += fmt("  %-12s %-9s %8s %11s %15s %15s\n", "device", "layer", "samples", "mean depth", "mean wait ms",
               "max wait ms");
    for (const QueueSummary& q : s.queues) {
      std::string name = "device" + std::to_string(q.device);
      for (const DeviceSummary& d : s.devices)
        if (d.device == q.device) name = d.name;
      out += fmt("  %-12s %-9s %8lld %11.1f %15.3f %15.3f\n", name.c_str(), std::string(layer_kind_name(q.layer)).c_str(),
                 static_cast<long long>(q.samples), q.mean_depth_tokens, q.mean_oldest_age_ms, q.max_oldest_age_ms);
    }
  }

  out += fmt("\nrequests: %lld arrived, %lld finished, %lld rejected; %lld tokens generated (%s)\n",
             static_cast<long long>(s.requests_arrived), static_cast<long long>(s.requests_finished),
             static_cast<long long>(s.requests_rejected), static_cast<long long>(s.tokens_generated),
             s.token_windows > 0 ? fmt("counted by the engine in %lld summary windows", static_cast<long long>(s.token_windows)).c_str()
                                 : "from request events: a request still running counts its first token only");
  out += fmt("throughput: %.1f tokens/s, %.2f requests/s\n", s.tokens_per_s, s.requests_per_s);
  out += fmt("\nlatency (ms)              %7s %9s %9s %9s %9s %9s\n", "count", "mean", "p50", "p90", "p99", "max");
  auto row = [&](const char* name, const LatencyStats& l) {
    out += fmt("  %-23s %7zu %9.2f %9.2f %9.2f %9.2f %9.2f\n", name, l.count, l.mean, l.p50, l.p90, l.p99, l.max);
  };
  row("time to first token", s.ttft_ms);
  row("time per output token", s.tpot_ms);
  row("end to end", s.e2e_ms);
  if (s.itl_p50_median_ms) {
    out += fmt("  inter-token, from %lld windows: median p50 %.2f ms, worst p99 %.2f ms\n",
               static_cast<long long>(s.summary_windows), *s.itl_p50_median_ms, s.itl_p99_worst_ms.value_or(0.0));
  }

  out += "\nmost skewed experts (tokens routed over the trace, against the block's mean)\n";
  if (s.skewed_experts.empty()) {
    out += "  no expert load recorded\n";
  } else {
    out += fmt("  %6s %7s %10s %8s %15s\n", "block", "expert", "tokens", "x mean", "block max/mean");
    for (const ExpertSkew& e : s.skewed_experts) {
      out += fmt("  %6d %7d %10lld %8.2f %15.2f\n", e.block, e.expert, static_cast<long long>(e.tokens),
                 e.ratio_to_mean, e.block_imbalance);
    }
  }
  out += fmt("\ncontrol commands: %lld\n", static_cast<long long>(s.control_events));
  return out;
}

}  // namespace sy::telemetry
