// Per-device profile of a recorded run (throughput, busy and stall shares by reason, mean queued
// tokens) from its window aggregates, and the side-by-side comparison of two runs that
// `switchyard trace compare` prints and the console's compare view shows (after Tracy's trace
// comparison, at the level of devices rather than zones).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "telemetry/span_windows.h"
#include "telemetry/trace_reader.h"

namespace sy::telemetry {

struct DeviceProfile {
  std::int32_t device = 0;
  std::string name;
  double rows_per_s = 0;       // token rows through its executions (compute lane) per second
  double sampled_per_s = 0;    // tokens it sampled per second (attention ranks): the run's output
  double busy_share = 0;       // compute lane time covered by executions
  double stall_share = 0;      // compute lane time stalled
  // Neither busy nor stalled (the rest): on the cpu and cuda backends the dispatch latency
  // between the engine's loop and the device; 0 on the sim.
  double host_share = 0;
  std::array<double, kStallReasons> stall_by_reason{};  // shares of the run's time, by reason
  double mean_queued_tokens = 0;  // tokens waiting in its μ-queues, time-averaged
  double link_busy_share = 0;    // send lane time busy (its outgoing links)
};

struct RunProfile {
  std::string label;
  std::int64_t begin_ns = 0, end_ns = 0;
  bool from_windows = true;  // false: computed from the spans (a recording made before the overview)
  std::vector<DeviceProfile> devices;
  double sampled_per_s() const;
};

// Profiles [t0, t1] of the trace (its whole span by default): its SPAN_WINDOWS when
// present, else the windows are computed from every span and queue sample (slower).
StatusOr<RunProfile> profile_trace(const TraceReader& reader, std::string label, std::int64_t t0 = TraceReader::kMin,
                                   std::int64_t t1 = TraceReader::kMax);
// Profiles windows already at hand over [t0, t1) (windows overlapping it, the shares over it).
RunProfile profile_windows(const std::vector<SpanWindow>& windows, std::vector<std::string> names, std::string label,
                           std::int64_t t0, std::int64_t t1);

struct DeviceDelta {
  std::int32_t device = 0;
  std::string name;
  const DeviceProfile* a = nullptr;  // null: the device is in one run only
  const DeviceProfile* b = nullptr;
};
// Devices of both runs matched by index.
std::vector<DeviceDelta> match_devices(const RunProfile& a, const RunProfile& b);

// The table `trace compare` prints: a row per device with A, B and B/A or B-A per measure.
std::string format_comparison(const RunProfile& a, const RunProfile& b);

}  // namespace sy::telemetry
