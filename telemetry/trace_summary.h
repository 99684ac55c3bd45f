// What `switchyard trace summarize` prints: per-device busy and stall time by reason, request
// throughput and latency percentiles, and the most skewed experts of a recorded trace.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "telemetry/trace_reader.h"

namespace sy::telemetry {

// Milliseconds. Percentiles by nearest rank over the sorted values.
struct LatencyStats {
  std::size_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};
LatencyStats latency_stats(std::vector<double> values_ms);

struct DeviceSummary {
  std::int32_t device = 0;
  std::string name;
  // Fractions of the trace window spent on the compute lane.
  double busy = 0;
  std::array<double, 5> stall{};  // by StallReason (index 0, None, stays 0)
  // The rest (busy + stalls + host = 1): on the cpu and cuda backends the dispatch latency
  // between the engine's loop and the device, before an execution starts and after it ends.
  double host = 0;
  std::int64_t executions = 0;    // attention, expert and sampler spans
  double rows_per_execution = 0;  // their mean tokens
  double executions_per_s = 0;    // executions / the window
  std::int64_t transfers = 0;     // Transfer spans on its Send lane: shipments to other devices
  double rows_per_transfer = 0;   // their mean tokens
};

// The sampled μ-queues of one device and layer kind: how deep they were and how long their
// oldest row had waited, over the samples that found them non-empty (queueing delay).
struct QueueSummary {
  std::int32_t device = 0;
  LayerKind layer = LayerKind::Attention;
  std::int64_t samples = 0;
  double mean_depth_tokens = 0;
  double mean_oldest_age_ms = 0;
  double max_oldest_age_ms = 0;
};

struct ExpertSkew {
  std::int32_t block = 0;
  std::int32_t expert = 0;
  std::int64_t tokens = 0;       // routed to it over the trace, all replicas
  double ratio_to_mean = 0;      // tokens / the block's mean per expert
  double block_imbalance = 0;    // the block's max / mean
};

struct TraceSummary {
  std::int64_t start_ns = 0, end_ns = 0;
  // The end of the device table's window: end_ns, except in a recording whose writer stopped
  // before committing its last spans (its request events run on): there each device's
  // fractions are of the time up to its own last span, and this is the latest of those.
  std::int64_t devices_end_ns = 0;
  std::map<std::string, std::string> metadata;
  std::vector<DeviceSummary> devices;
  std::vector<QueueSummary> queues;  // by device, then layer kind
  std::int64_t requests_arrived = 0, requests_finished = 0, requests_rejected = 0;
  // The engine's count from its summary windows (token_windows of them) when recorded, else per
  // request the most tokens_out seen, summed (a request still running counts its first token).
  std::int64_t tokens_generated = 0;
  std::int64_t token_windows = 0;
  double tokens_per_s = 0, requests_per_s = 0;
  LatencyStats ttft_ms;  // first token - arrival
  LatencyStats tpot_ms;  // (finished - first token) / (tokens_out - 1): a request's mean inter-token time
  LatencyStats e2e_ms;   // finished - arrival
  // From the summary windows, when recorded: the median of the windows' ITL p50 and the worst p99.
  std::optional<double> itl_p50_median_ms, itl_p99_worst_ms;
  std::vector<ExpertSkew> skewed_experts;  // most skewed first
  std::int64_t control_events = 0;
  std::int64_t summary_windows = 0;
};

StatusOr<TraceSummary> summarize_trace(const TraceReader& trace, int top_experts = 5);
std::string format_trace_summary(const TraceSummary& summary);

}  // namespace sy::telemetry
