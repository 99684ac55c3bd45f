#include "console/model/device_activity.h"

#include <algorithm>
#include <map>
#include <utility>

#include "telemetry/host_share.h"

namespace sy::console {
namespace {

// Sums one device's windows; turned into an activity at the end.
struct Accumulator {
  double seconds = 0;
  double busy_s = 0, qe_s = 0, barrier_s = 0, transfer_s = 0, weights_s = 0;
  double executions = 0, rows = 0;
  bool traffic = false;
  double traffic_seconds = 0;  // time of the windows that reported traffic
  double transfers = 0, transfer_rows = 0;
  double takes = 0, wait_ms = 0, wait_max_ms = 0;

  void add(const DeviceWindow& w, double s) {
    seconds += s;
    busy_s += w.busy * s;
    qe_s += w.stall_queue_empty * s;
    barrier_s += w.stall_barrier * s;
    transfer_s += w.stall_transfer * s;
    weights_s += w.stall_weights * s;
    executions += static_cast<double>(w.executions);
    rows += w.rows_per_execution * static_cast<double>(w.executions);
    if (w.has_traffic) {
      traffic = true;
      traffic_seconds += s;
      transfers += static_cast<double>(w.transfers);
      transfer_rows += w.rows_per_transfer * static_cast<double>(w.transfers);
      takes += static_cast<double>(w.queue_takes);
      wait_ms += w.queue_wait_mean_ms * static_cast<double>(w.queue_takes);
      wait_max_ms = std::max(wait_max_ms, w.queue_wait_max_ms);
    }
  }

  void merge(const Accumulator& o) {
    seconds += o.seconds;
    busy_s += o.busy_s;
    qe_s += o.qe_s;
    barrier_s += o.barrier_s;
    transfer_s += o.transfer_s;
    weights_s += o.weights_s;
    executions += o.executions;
    rows += o.rows;
    traffic = traffic || o.traffic;
    traffic_seconds += o.traffic_seconds;
    transfers += o.transfers;
    transfer_rows += o.transfer_rows;
    takes += o.takes;
    wait_ms += o.wait_ms;
    wait_max_ms = std::max(wait_max_ms, o.wait_max_ms);
  }

  // Shares and rates per device: a group's sums are divided by its device count through seconds.
  DeviceActivity activity() const {
    DeviceActivity a;
    a.seconds = seconds;
    if (seconds > 0) {
      a.busy = busy_s / seconds;
      a.stall_queue_empty = qe_s / seconds;
      a.stall_barrier = barrier_s / seconds;
      a.stall_transfer = transfer_s / seconds;
      a.stall_weights = weights_s / seconds;
      a.executions_per_s = executions / seconds;
    }
    a.rows_per_execution = executions > 0 ? rows / executions : 0;
    a.has_traffic = traffic;
    if (traffic_seconds > 0) a.transfers_per_s = transfers / traffic_seconds;
    a.rows_per_transfer = transfers > 0 ? transfer_rows / transfers : 0;
    a.queue_wait_mean_ms = takes > 0 ? wait_ms / takes : 0;
    a.queue_wait_max_ms = wait_max_ms;
    return a;
  }
};

}  // namespace

std::string DeviceActivity::main_stall() const {
  const std::pair<double, const char*> stalls[] = {{stall_queue_empty, "queue_empty"},
                                                   {stall_barrier, "barrier"},
                                                   {stall_transfer, "transfer"},
                                                   {stall_weights, "weights"}};
  const auto* best = std::max_element(std::begin(stalls), std::end(stalls),
                                      [](const auto& a, const auto& b) { return a.first < b.first; });
  return best->first > 0 ? best->second : "";
}

double DeviceActivity::host() const {
  if (seconds <= 0) return 0.0;
  return telemetry::host_share(busy + stall_queue_empty + stall_barrier + stall_transfer + stall_weights);
}

std::string DeviceActivity::main_idle() const {
  const double largest = std::max({stall_queue_empty, stall_barrier, stall_transfer, stall_weights});
  const double h = host();
  return h > 0 && h > largest ? "host" : main_stall();
}

ActivityTable device_activity(const std::vector<const SummaryPoint*>& points, const RunMeta* meta,
                              std::int64_t t0_ns, std::int64_t t1_ns) {
  ActivityTable table;
  std::map<std::int32_t, Accumulator> acc;
  bool first = true;
  for (const SummaryPoint* point : points) {
    const SummaryPoint& p = *point;
    if (p.t_end_ns <= t0_ns || p.t_end_ns > t1_ns) continue;
    const double s = static_cast<double>(std::max<std::int64_t>(0, p.t_end_ns - p.t_begin_ns)) * 1e-9;
    if (s <= 0) continue;
    if (first) table.t0_ns = p.t_begin_ns;
    first = false;
    table.t1_ns = p.t_end_ns;
    ++table.windows;
    for (const DeviceWindow& w : p.devices) acc[w.device].add(w, s);
  }
  Accumulator attention, expert;
  std::int32_t n_attention = 0, n_expert = 0;
  for (const auto& [device, a] : acc) {
    DeviceActivity d = a.activity();
    d.device = device;
    d.name = "device " + std::to_string(device);
    if (meta) {
      for (const DeviceInfo& info : meta->devices) {
        if (info.index != device) continue;
        d.name = info.name;
        d.attention = info.rank >= 0;
      }
    }
    (d.attention ? attention : expert).merge(a);
    ++(d.attention ? n_attention : n_expert);
    table.devices.push_back(std::move(d));
  }
  if (!meta) return table;  // which devices are attention ranks is unknown: no groups
  const auto group = [&](const char* label, const Accumulator& a, std::int32_t n) {
    if (n == 0) return;
    ActivityGroup g;
    g.label = label;
    g.devices = n;
    g.mean = a.activity();  // seconds summed over devices: rates come out per device
    g.mean.attention = std::string(label) == "attention";
    table.groups.push_back(std::move(g));
  };
  group("attention", attention, n_attention);
  group("expert", expert, n_expert);
  return table;
}

}  // namespace sy::console
