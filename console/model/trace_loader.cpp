#include "console/model/trace_loader.h"

#include <algorithm>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

namespace sy::console {

StatusOr<RunMeta> trace_run_meta(const telemetry::TraceReader& reader) {
  using nlohmann::json;
  const std::map<std::string, std::string> kv = reader.metadata();
  json object = json::object();
  // A recorder may store the whole meta object under one key, or one key per field.
  for (const char* whole : {"meta", "run_meta"}) {
    if (auto it = kv.find(whole); it != kv.end()) {
      json j = json::parse(it->second, nullptr, false);
      if (!j.is_discarded() && j.is_object()) object = j;
    }
  }
  for (const auto& [key, value] : kv) {
    if (key == "meta" || key == "run_meta" || object.contains(key)) continue;
    json j = json::parse(value, nullptr, false);
    object[key] = j.is_discarded() ? json(value) : j;
  }
  // Scalars stored as text ("32") where the meta object has numbers.
  auto numeric = [](json& j) {
    if (!j.is_string()) return;
    json n = json::parse(j.get<std::string>(), nullptr, false);
    if (!n.is_discarded() && n.is_number()) j = n;
  };
  for (const char* key : {"schema_version", "run_id", "wall_origin_unix_ns", "pace", "now_ns", "row_bytes"})
    if (object.contains(key)) numeric(object[key]);
  // A key recorded with a different JSON type than the meta object uses is dropped rather than
  // failing the whole trace: the views work without it.
  for (int attempt = 0; attempt < 16; ++attempt) {
    auto parsed = parse_run_meta(object.dump());
    if (parsed.ok()) {
      RunMeta meta = std::move(*parsed);
      if (meta.devices.empty()) {
        const auto names = reader.device_names();
        for (std::size_t i = 0; i < names.size(); ++i)
          meta.devices.push_back({static_cast<std::int32_t>(i), names[i], -1, 0});
      }
      return meta;
    }
    const std::string& message = parsed.status().message();
    const auto open = message.find('"');
    const auto close = open == std::string::npos ? std::string::npos : message.find('"', open + 1);
    if (close == std::string::npos) return parsed.status();
    object.erase(message.substr(open + 1, close - open - 1));
  }
  return Status::Error("trace metadata: too many malformed keys");
}

Status load_trace(const telemetry::TraceReader& reader, ConsoleModel& model) {
  model.clear();
  model.set_bounded(false);

  auto meta = trace_run_meta(reader);
  if (meta.ok()) model.set_meta(std::move(*meta));

  auto spans = reader.spans();
  if (!spans.ok()) return Status::Error("reading spans: " + spans.status().message());
  for (const auto& s : *spans) model.add_span(s);

  auto queues = reader.queue_samples();
  if (!queues.ok()) return Status::Error("reading queue samples: " + queues.status().message());
  // Size every series to hold its queue's whole recording.
  std::map<QueueKey, std::size_t> per_queue;
  std::size_t most = 0;
  for (const auto& q : *queues) most = std::max(most, ++per_queue[{q.device, q.layer, q.block, q.index}]);
  model.queues().set_per_queue_capacity(std::max<std::size_t>(most, 16));
  for (const auto& q : *queues) model.add_queue_sample(q);

  return load_trace_events(reader, model);
}

Status load_trace_events(const telemetry::TraceReader& reader, ConsoleModel& model) {
  auto loads = reader.expert_load();
  if (!loads.ok()) return Status::Error("reading expert load: " + loads.status().message());
  for (const auto& l : *loads) model.add_expert_load(l);

  auto requests = reader.requests();
  if (!requests.ok()) return Status::Error("reading requests: " + requests.status().message());
  for (const auto& r : *requests) model.add_request_event(r);

  auto summaries = reader.summaries();
  if (!summaries.ok()) return Status::Error("reading summaries: " + summaries.status().message());
  for (const auto& s : *summaries) model.add_summary_json(s);

  auto control = reader.control_events();
  if (!control.ok()) return Status::Error("reading control events: " + control.status().message());
  for (const auto& c : *control) model.add_control_json(c);
  return Status::Ok();
}

}  // namespace sy::console
