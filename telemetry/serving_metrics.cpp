#include "telemetry/serving_metrics.h"

#include "telemetry/host_share.h"

namespace sy::telemetry {

namespace {

// Latency buckets in seconds: inter-token times are milliseconds, first tokens and whole
// requests up to minutes.
const std::vector<double> kItlBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5};
const std::vector<double> kTtftBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0};
const std::vector<double> kE2eBuckets = {0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0};

bool number(const nlohmann::json& j, const char* key) { return j.contains(key) && j[key].is_number(); }

}  // namespace

ServingMetrics::ServingMetrics(PrometheusRegistry& r)
    : running_(r.gauge("switchyard_requests_running", "Requests being decoded.")),
      waiting_(r.gauge("switchyard_requests_waiting", "Requests waiting for admission.")),
      tokens_per_s_(r.gauge("switchyard_generation_tokens_per_second", "Tokens generated per second over the last window.")),
      kv_usage_(r.gauge("switchyard_kv_cache_usage_ratio", "Fraction of KV cache pages in use.")),
      generated_tokens_(r.counter("switchyard_generation_tokens_total", "Tokens generated.")),
      finished_requests_(r.counter("switchyard_requests_finished_total", "Requests that produced their last token.")),
      rejected_requests_(r.counter("switchyard_requests_rejected_total", "Requests refused, by reason.", {"reason"})),
      dropped_events_(r.gauge("switchyard_telemetry_dropped_events", "Telemetry records dropped since start (full rings).")),
      prefix_queries_(r.counter("switchyard_prefix_cache_queries_total",
                                "Prompt tokens admitted (counted with --prefix-caching only).")),
      prefix_hits_(r.counter("switchyard_prefix_cache_hits_total",
                             "Prompt tokens whose KV pages came from the prefix cache.")),
      itl_(r.histogram("switchyard_inter_token_latency_seconds", "Time between consecutive tokens of a request.",
                       kItlBuckets)),
      ttft_(r.histogram("switchyard_time_to_first_token_seconds", "Time from arrival to the first token.",
                        kTtftBuckets)),
      e2e_(r.histogram("switchyard_request_latency_seconds", "Time from arrival to the last token.", kE2eBuckets)),
      queue_depth_(r.gauge("switchyard_queue_depth_tokens", "Tokens waiting in all of a device's queues.", {"device"})),
      busy_(r.gauge("switchyard_device_busy_ratio", "Fraction of the last window a device computed.", {"device"})),
      stall_(r.gauge("switchyard_device_stall_ratio", "Fraction of the last window a device stalled, by reason.",
                     {"device", "reason"})),
      host_(r.gauge("switchyard_device_host_ratio",
                    "Fraction of the last window a device was neither busy nor stalled: dispatch latency between "
                    "the engine's loop and the device.",
                    {"device"})),
      imbalance_(r.gauge("switchyard_expert_load_imbalance", "Max over mean tokens per expert in the last window.",
                         {"block"})) {}

void ServingMetrics::set_device_names(std::vector<std::string> names) { device_names_ = std::move(names); }

std::string ServingMetrics::device_label(std::int64_t index) const {
  if (index >= 0 && static_cast<std::size_t>(index) < device_names_.size() &&
      !device_names_[static_cast<std::size_t>(index)].empty()) {
    return device_names_[static_cast<std::size_t>(index)];
  }
  return std::to_string(index);
}

void ServingMetrics::on_summary(const nlohmann::json& s) {
  if (!s.is_object()) return;
  if (number(s, "running")) running_.get().set(s["running"].get<double>());
  if (number(s, "waiting")) waiting_.get().set(s["waiting"].get<double>());
  if (number(s, "tokens_per_s")) tokens_per_s_.get().set(s["tokens_per_s"].get<double>());
  if (number(s, "kv_usage")) kv_usage_.get().set(s["kv_usage"].get<double>());
  if (number(s, "requests_finished")) finished_requests_.get().inc(s["requests_finished"].get<double>());
  if (number(s, "dropped_events")) dropped_events_.get().set(s["dropped_events"].get<double>());
  if (s.contains("prefix_cache") && s["prefix_cache"].is_object()) {
    const auto& pc = s["prefix_cache"];
    if (number(pc, "queries")) prefix_queries_.get().inc(pc["queries"].get<double>());
    if (number(pc, "hits")) prefix_hits_.get().inc(pc["hits"].get<double>());
  }
  if (s.contains("devices") && s["devices"].is_array()) {
    for (const auto& d : s["devices"]) {
      if (!d.is_object() || !d.contains("device") || !d["device"].is_number_integer()) continue;
      const std::string label = device_label(d["device"].get<std::int64_t>());
      if (number(d, "busy")) busy_.with({label}).set(d["busy"].get<double>());
      if (d.contains("stall") && d["stall"].is_object()) {
        double accounted = number(d, "busy") ? d["busy"].get<double>() : 0.0;
        bool whole = number(d, "busy");
        for (const auto& [reason, value] : d["stall"].items()) {
          if (!value.is_number()) {
            whole = false;
            continue;
          }
          stall_.with({label, reason}).set(value.get<double>());
          accounted += value.get<double>();
        }
        // What busy and the stalls leave: only from a device whose shares are all numbers.
        if (whole) host_.with({label}).set(host_share(accounted));
      }
    }
  }
  if (s.contains("expert_imbalance") && s["expert_imbalance"].is_array()) {
    const auto& blocks = s["expert_imbalance"];
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      if (blocks[b].is_number()) imbalance_.with({std::to_string(b)}).set(blocks[b].get<double>());
    }
  }
}

void ServingMetrics::add_generated_tokens(std::int64_t tokens) {
  generated_tokens_.get().inc(static_cast<double>(tokens));
}
void ServingMetrics::observe_inter_token_latency(double seconds) { itl_.get().observe(seconds); }
void ServingMetrics::observe_time_to_first_token(double seconds) { ttft_.get().observe(seconds); }
void ServingMetrics::observe_end_to_end_latency(double seconds) { e2e_.get().observe(seconds); }
void ServingMetrics::add_rejected(const std::string& reason) { rejected_requests_.with({reason}).inc(1); }
void ServingMetrics::set_queue_depth(std::int32_t device, std::int64_t tokens) {
  queue_depth_.with({device_label(device)}).set(static_cast<double>(tokens));
}

}  // namespace sy::telemetry
