// The engine's Prometheus metrics under one set of names (docs/telemetry-protocol.md,
// "Prometheus metrics"): request counts, throughput, latency histograms, KV usage, queue depth,
// stall fractions and expert-load imbalance, fed from the same summary objects the stream carries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "telemetry/prometheus_registry.h"

namespace sy::telemetry {

class ServingMetrics {
 public:
  // Registers every metric in `registry`, which must outlive this object.
  explicit ServingMetrics(PrometheusRegistry& registry);

  // Device labels: names by device index (from meta.devices); an index without a name is labelled by its number.
  void set_device_names(std::vector<std::string> names);

  // Applies one `summary` object (as published on the stream): requests running and waiting,
  // tokens/s, KV usage, busy and stall fractions per device, imbalance per block, finished
  // requests, dropped events. Keys that are missing or of the wrong type are skipped.
  void on_summary(const nlohmann::json& summary);

  // Per event, from the engine's loop: these feed counters and histograms exactly.
  void add_generated_tokens(std::int64_t tokens);
  void observe_inter_token_latency(double seconds);
  void observe_time_to_first_token(double seconds);
  void observe_end_to_end_latency(double seconds);
  // A request refused, by reason (queue_full, never_fits).
  void add_rejected(const std::string& reason);
  // Tokens waiting in all of a device's μ-queues.
  void set_queue_depth(std::int32_t device, std::int64_t tokens);

 private:
  std::string device_label(std::int64_t index) const;

  std::vector<std::string> device_names_;
  Family<Gauge>& running_;
  Family<Gauge>& waiting_;
  Family<Gauge>& tokens_per_s_;
  Family<Gauge>& kv_usage_;
  Family<Counter>& generated_tokens_;
  Family<Counter>& finished_requests_;
  Family<Counter>& rejected_requests_;
  Family<Gauge>& dropped_events_;
  Family<Counter>& prefix_queries_;
  Family<Counter>& prefix_hits_;
  Family<Histogram>& itl_;
  Family<Histogram>& ttft_;
  Family<Histogram>& e2e_;
  Family<Gauge>& queue_depth_;
  Family<Gauge>& busy_;
  Family<Gauge>& stall_;
  Family<Gauge>& host_;
  Family<Gauge>& imbalance_;
};

}  // namespace sy::telemetry
