// Where each device's time goes over a range of window summaries: busy and stall shares,
// executions per second and their rows, shipments and their rows, head-of-line queueing delay.
// It is what an operator needs to see why asynchronous expert parallelism loses (issue 17):
// small executions (batch fragmentation), devices starved or stalled, rows waiting in queues.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "console/model/run_meta.h"
#include "console/model/summary_store.h"

namespace sy::console {

struct DeviceActivity {
  std::int32_t device = 0;
  std::string name;
  bool attention = false;  // an attention rank (else an expert-only device)
  double seconds = 0;      // summary time covered
  double busy = 0;         // fractions of `seconds`
  double stall_queue_empty = 0, stall_barrier = 0, stall_transfer = 0, stall_weights = 0;
  double executions_per_s = 0;
  double rows_per_execution = 0;
  bool has_traffic = false;  // the summaries carried shipments and queue waits
  double transfers_per_s = 0;
  double rows_per_transfer = 0;
  double queue_wait_mean_ms = 0;  // over the range's queue takes
  double queue_wait_max_ms = 0;
  // The largest stall's name ("queue_empty", "barrier", "transfer", "weights"), or "" if none.
  std::string main_stall() const;
  // The rest of the time, neither busy nor stalled: on the cpu and cuda backends the dispatch
  // latency between the engine's loop and the device (0 on the sim).
  double host() const;
  // Where most of the time not busy went: main_stall(), or "host" where host time exceeds every
  // stall (on a real backend, dispatch latency may outweigh the runtime's stalls).
  std::string main_idle() const;
};

struct ActivityGroup {
  std::string label;  // "attention" or "expert"
  DeviceActivity mean;  // time-weighted over its devices (name empty)
  std::int32_t devices = 0;
};

struct ActivityTable {
  std::vector<DeviceActivity> devices;  // by device index
  std::vector<ActivityGroup> groups;    // attention first, then expert; only non-empty ones
  std::int64_t t0_ns = 0, t1_ns = 0;    // the summaries' span actually covered
  std::int32_t windows = 0;
};

// Aggregates the summaries (in time order, e.g. ConsoleModel::summary_points(): the whole run's
// folded windows, then the held ones) whose windows end in (t0, t1]. Per-window rates are
// weighted by window length; means of rows by the executions (or shipments, or queue takes)
// behind them. meta supplies names and which devices are attention ranks; without it devices
// are numbered.
ActivityTable device_activity(const std::vector<const SummaryPoint*>& points, const RunMeta* meta,
                              std::int64_t t0_ns, std::int64_t t1_ns);

}  // namespace sy::console
