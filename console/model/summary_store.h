// Window summaries (the stream's `summary` topic): throughput, latency percentiles, queueing,
// per-device busy/stall, kept in a ring buffer for the charts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "console/model/ring_buffer.h"
#include "base/status.h"

namespace sy::console {

struct LatencySummary {
  std::int64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;  // milliseconds
};

struct DeviceWindow {
  std::int32_t device = 0;
  double busy = 0;
  double stall_queue_empty = 0, stall_barrier = 0, stall_transfer = 0, stall_weights = 0;
  std::int64_t executions = 0;
  double rows_per_execution = 0;
  // Shipments sent and the head-of-line wait of queue takes; false in summaries that predate
  // them (recordings made before the engine reported them).
  bool has_traffic = false;
  std::int64_t transfers = 0;
  double rows_per_transfer = 0;
  std::int64_t queue_takes = 0;
  double queue_wait_mean_ms = 0;
  double queue_wait_max_ms = 0;
};

struct SummaryPoint {
  std::int64_t t_begin_ns = 0;
  std::int64_t t_end_ns = 0;
  double tokens_per_s = 0;
  double requests_per_s = 0;
  std::int64_t requests_finished = 0;
  std::int64_t running = 0;
  std::int64_t waiting = 0;
  LatencySummary itl_ms;
  LatencySummary ttft_ms;
  double kv_usage = 0;
  // Prompt tokens admitted in the window, and those a prefix cache served (0 without one).
  std::int64_t prefix_queries = 0;
  std::int64_t prefix_hits = 0;
  double prefix_hit_rate() const {
    return prefix_queries > 0 ? static_cast<double>(prefix_hits) / static_cast<double>(prefix_queries) : 0.0;
  }
  std::vector<DeviceWindow> devices;
  std::vector<double> expert_imbalance;  // per block
  std::int64_t dropped_events = 0;
};

StatusOr<SummaryPoint> parse_summary(const std::string& json_object);

// The charts' one-line reading of a window. A latency no request of the window measured reads
// "-" rather than a 0.0 the run never had.
std::string describe_summary(const SummaryPoint& p);

class SummaryStore {
 public:
  explicit SummaryStore(std::size_t capacity = 7200) : points_(capacity) {}

  // Keeps time order: a window that does not end after the newest one is ignored.
  bool add(const SummaryPoint& p);
  void clear() { points_.clear(); }
  void trim(std::int64_t cutoff_ns);

  const RingBuffer<SummaryPoint>& points() const { return points_; }
  // The window containing t, else the last one ending at or before t; null when none.
  const SummaryPoint* at(std::int64_t t_ns) const;
  const SummaryPoint* latest() const { return points_.empty() ? nullptr : &points_.back(); }

 private:
  RingBuffer<SummaryPoint> points_;
};

}  // namespace sy::console
