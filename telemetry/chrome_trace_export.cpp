#include "telemetry/chrome_trace_export.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace sy::telemetry {

namespace {

// The run-wide process (control commands, throughput counters) sits before the devices.
constexpr std::int64_t kRunPid = 0;
std::int64_t device_pid(std::int32_t device) { return std::int64_t{device} + 1; }

// Nanoseconds as microseconds with three decimals, exactly (no floating point).
std::string micros(std::int64_t ns) {
  char buf[32];
  const bool negative = ns < 0;
  const std::uint64_t a = negative ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  std::snprintf(buf, sizeof buf, "%s%" PRIu64 ".%03" PRIu64, negative ? "-" : "", a / 1000, a % 1000);
  return buf;
}

std::string json_string(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) {}
  void event(const std::string& body) {
    out_ << (first_ ? "\n" : ",\n") << '{' << body << '}';
    first_ = false;
  }

 private:
  std::ostream& out_;
  bool first_ = true;
};

std::string meta_event(const char* what, std::int64_t pid, std::int64_t tid, const std::string& args) {
  return std::string("\"ph\":\"M\",\"name\":\"") + what + "\",\"pid\":" + std::to_string(pid) +
         ",\"tid\":" + std::to_string(tid) + ",\"args\":" + args;
}

std::string span_name(const Span& s) {
  if (s.kind == SpanKind::Stall) return "stall: " + std::string(stall_reason_name(s.stall_reason));
  return std::string(span_kind_name(s.kind));
}

}  // namespace

Status write_chrome_trace(const TraceReader& trace, std::ostream& out, const ChromeExportOptions& options) {
  auto selected = [&](std::int32_t d) { return !options.devices || options.devices->count(d) > 0; };
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":";
  nlohmann::json other = nlohmann::json::object();
  for (const auto& [k, v] : trace.metadata()) other[k] = v;
  out << other.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out << ",\"traceEvents\":[";
  EventWriter w(out);

  w.event(meta_event("process_name", kRunPid, 0, "{\"name\":\"switchyard run\"}"));
  w.event(meta_event("process_sort_index", kRunPid, 0, "{\"sort_index\":-1}"));
  const std::vector<std::string> names = trace.device_names();
  std::set<std::int32_t> named;
  auto name_device = [&](std::int32_t d) {
    if (!named.insert(d).second) return;
    const std::string name = d >= 0 && static_cast<std::size_t>(d) < names.size() && !names[static_cast<std::size_t>(d)].empty()
                                 ? names[static_cast<std::size_t>(d)]
                                 : "device" + std::to_string(d);
    w.event(meta_event("process_name", device_pid(d), 0, "{\"name\":" + json_string(name + " (device " + std::to_string(d) + ")") + "}"));
    w.event(meta_event("process_sort_index", device_pid(d), 0, "{\"sort_index\":" + std::to_string(d) + "}"));
    for (Lane lane : {Lane::Compute, Lane::Send, Lane::Receive}) {
      const auto tid = static_cast<std::int64_t>(lane);
      w.event(meta_event("thread_name", device_pid(d), tid, "{\"name\":\"" + std::string(lane_name(lane)) + "\"}"));
      w.event(meta_event("thread_sort_index", device_pid(d), tid, "{\"sort_index\":" + std::to_string(tid) + "}"));
    }
  };
  for (std::size_t d = 0; d < names.size(); ++d)
    if (selected(static_cast<std::int32_t>(d))) name_device(static_cast<std::int32_t>(d));

  // Spans in chunks of run time, so that a long trace never sits in memory whole; a span is
  // written by the chunk its start falls in (the first chunk also takes those that began
  // before the range and reach into it).
  const std::int64_t t_begin = std::max(trace.start_ns(), options.from_ns);
  const std::int64_t t_end = std::min(trace.end_ns(), options.to_ns);
  const std::int64_t chunk = std::max<std::int64_t>((t_end - t_begin) / 64 + 1, 1'000'000'000);
  for (std::int64_t t0 = t_begin; t0 <= t_end; t0 += chunk) {
    const std::int64_t t1 = std::min(t0 + chunk - 1, t_end);
    auto spans = trace.spans(t0, t1);
    if (!spans.ok()) return spans.status();
    for (const Span& s : *spans) {
      if (s.start_ns > t1 || (s.start_ns < t0 && t0 != t_begin)) continue;
      const bool to_peer = s.kind == SpanKind::Transfer && s.lane == Lane::Send && s.peer >= 0 && selected(s.peer);
      if (!selected(s.device)) {
        if (to_peer) {
          name_device(s.peer);
          w.event("\"ph\":\"X\",\"name\":" + json_string(span_name(s)) + ",\"cat\":\"transfer\",\"pid\":" +
                  std::to_string(device_pid(s.peer)) + ",\"tid\":" + std::to_string(static_cast<int>(Lane::Receive)) +
                  ",\"ts\":" + micros(s.start_ns) + ",\"dur\":" + micros(std::max<std::int64_t>(s.end_ns - s.start_ns, 0)) +
                  ",\"args\":{\"block\":" + std::to_string(s.block) + ",\"microbatch\":" + std::to_string(s.microbatch) +
                  ",\"tokens\":" + std::to_string(s.tokens) + ",\"peer\":" + std::to_string(s.device) + "}");
        }
        continue;
      }
      name_device(s.device);
      std::string body = "\"ph\":\"X\",\"name\":" + json_string(span_name(s)) + ",\"cat\":\"" +
                         std::string(span_kind_name(s.kind)) + "\",\"pid\":" + std::to_string(device_pid(s.device)) +
                         ",\"tid\":" + std::to_string(static_cast<int>(s.lane)) + ",\"ts\":" + micros(s.start_ns) +
                         ",\"dur\":" + micros(std::max<std::int64_t>(s.end_ns - s.start_ns, 0)) +
                         ",\"args\":{\"block\":" + std::to_string(s.block);
      const char* index_name = s.kind == SpanKind::Attention || s.kind == SpanKind::Sampler ? "rank" : "expert";
      body += std::string(",\"") + index_name + "\":" + std::to_string(s.index) +
              ",\"microbatch\":" + std::to_string(s.microbatch) + ",\"tokens\":" + std::to_string(s.tokens);
      if (s.kind == SpanKind::Transfer) body += ",\"peer\":" + std::to_string(s.peer);
      if (s.kind == SpanKind::Stall) body += ",\"reason\":\"" + std::string(stall_reason_name(s.stall_reason)) + "\"";
      w.event(body + "}");
      // A transfer is recorded once, on its source's send lane; show it on the destination's
      // receive lane too.
      if (to_peer) {
        name_device(s.peer);
        w.event("\"ph\":\"X\",\"name\":" + json_string(span_name(s)) + ",\"cat\":\"transfer\",\"pid\":" +
                std::to_string(device_pid(s.peer)) + ",\"tid\":" + std::to_string(static_cast<int>(Lane::Receive)) +
                ",\"ts\":" + micros(s.start_ns) + ",\"dur\":" + micros(std::max<std::int64_t>(s.end_ns - s.start_ns, 0)) +
                ",\"args\":{\"block\":" + std::to_string(s.block) + ",\"microbatch\":" + std::to_string(s.microbatch) +
                ",\"tokens\":" + std::to_string(s.tokens) + ",\"peer\":" + std::to_string(s.device) + "}");
      }
    }
  }

  for (std::int64_t t0 = t_begin; t0 <= t_end; t0 += chunk) {
    const std::int64_t t1 = std::min(t0 + chunk - 1, t_end);
    auto queues = trace.queue_samples(t0, t1);
    if (!queues.ok()) return queues.status();
    for (const QueueSample& q : *queues) {
      if (!selected(q.device)) continue;
      name_device(q.device);
      const std::string name = q.layer == LayerKind::Sampler
                                   ? "queue sampler"
                                   : "queue b" + std::to_string(q.block) + " " + std::string(layer_kind_name(q.layer)) +
                                         " " + std::to_string(q.index);
      w.event("\"ph\":\"C\",\"name\":" + json_string(name) + ",\"pid\":" + std::to_string(device_pid(q.device)) +
              ",\"ts\":" + micros(q.t_ns) + ",\"args\":{\"tokens\":" + std::to_string(q.depth_tokens) + "}");
    }
  }

  auto control = trace.control_events();
  if (!control.ok()) return control.status();
  for (const std::string& text : *control) {
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    if (!doc.is_object()) continue;
    const std::int64_t t = doc.contains("t_ns") && doc["t_ns"].is_number() ? doc["t_ns"].get<std::int64_t>() : t_begin;
    if (t < t_begin || t > t_end) continue;
    const std::string cmd = doc.contains("cmd") && doc["cmd"].is_string() ? doc["cmd"].get<std::string>() : "control";
    w.event("\"ph\":\"i\",\"s\":\"g\",\"name\":" + json_string(cmd) + ",\"cat\":\"control\",\"pid\":0,\"tid\":0,\"ts\":" +
            micros(t) + ",\"args\":" + doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }

  auto summaries = trace.summaries();
  if (!summaries.ok()) return summaries.status();
  for (const std::string& text : *summaries) {
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    if (!doc.is_object() || !doc.contains("t_end_ns") || !doc["t_end_ns"].is_number()) continue;
    const std::int64_t t = doc["t_end_ns"].get<std::int64_t>();
    if (t < t_begin || t > t_end) continue;
    const std::string ts = micros(t);
    for (const char* key : {"tokens_per_s", "running", "waiting", "kv_usage"}) {
      if (!doc.contains(key) || !doc[key].is_number()) continue;
      w.event(std::string("\"ph\":\"C\",\"name\":\"") + key + "\",\"pid\":0,\"ts\":" + ts + ",\"args\":{\"value\":" +
              doc[key].dump() + "}");
    }
  }
  out << "\n]}\n";
  if (!out) return Status::Error("writing the Chrome trace failed");
  return Status::Ok();
}

Status export_chrome_trace(const TraceReader& trace, const std::filesystem::path& path,
                           const ChromeExportOptions& options) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::Error(path.string() + ": cannot create " + tmp.string());
    if (Status s = write_chrome_trace(trace, out, options); !s.ok()) {
      out.close();
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return Status::Error(path.string() + ": " + s.message());
    }
    out.close();
    if (!out) return Status::Error(path.string() + ": writing failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status::Error(path.string() + ": cannot move the finished file into place: " + ec.message());
  }
  return Status::Ok();
}

}  // namespace sy::telemetry
