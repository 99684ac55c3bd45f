// Feeds one deployment into the telemetry hub (docs/telemetry-protocol.md): a span per
// execution, stall and transfer on each device's producer, μ-queue depth samples, expert load
// per window, request lifecycle events, a summary per window, and the run's metadata; and the
// same numbers to the Prometheus metrics. Runs entirely on the deployment's loop thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/runtime_observer.h"
#include "engine/serving/deployment.h"
#include "engine/serving/request_observer.h"
#include "telemetry/producer.h"
#include "telemetry/serving_metrics.h"
#include "telemetry/telemetry_hub.h"

namespace sy {

// What the metadata says about a run beyond the deployment itself.
struct RunInfo {
  std::string backend;                 // "sim" or "cpu"
  std::string hardware;                // device profile name on sim, empty on cpu
  std::string model_name;
  ModelConfig model;
  std::int32_t devices_per_node = 0;   // 0: one node
  std::int64_t row_bytes = 0;          // bytes of one token row on a link
  nlohmann::json workload;             // null, or {"rate", "skew", "length_class"} (demo)
  // Across processes: each rank's state and clock offset (meta.processes), on the loop's
  // thread; unset in one process.
  std::function<nlohmann::json()> processes;
};

class TelemetryBridge final : public RuntimeObserver, public RequestObserver {
 public:
  // How long a virtual-clock run's producer waits for the publisher per record before it drops.
  static constexpr std::chrono::microseconds kVirtualClockWait{1'000'000};
  struct Options {
    std::int64_t queue_sample_ns = 10'000'000;        // μ-queue depths every 10 ms of run time
    std::int64_t load_window_ns = 250'000'000;        // expert load (and meta) per 250 ms window
    std::int64_t summary_window_ns = 500'000'000;     // one summary per 500 ms
  };

  // Registers with the deployment's observers and starts the periodic samples on its loop.
  // `prometheus` may be null.
  TelemetryBridge(Deployment& deployment, telemetry::TelemetryHub& hub, telemetry::ServingMetrics* prometheus,
                  RunInfo info, Options options);
  // Unregisters; the periodic events it posted turn into no-ops.
  ~TelemetryBridge();
  TelemetryBridge(const TelemetryBridge&) = delete;
  TelemetryBridge& operator=(const TelemetryBridge&) = delete;

  // The meta object (also get_state's "state", which adds "load").
  nlohmann::json meta() const;
  // What the deployment runs: backend, hardware profile, model.
  const RunInfo& info() const { return info_; }
  // Tokens routed per device and per (block, expert) over the last complete summary window.
  nlohmann::json load() const;
  // Tokens routed to each (block, expert) over the last `windows` complete summary windows (at
  // most kLoadHistory; fewer while the run is young): what expert rebalancing plans from.
  struct RecentLoad {
    std::vector<std::vector<double>> per_expert;  // [block][expert]; empty rows for dense blocks
    std::int64_t window_ns = 0;                   // the time the windows cover
    std::int32_t windows = 0;
  };
  static constexpr std::int32_t kLoadHistory = 8;
  RecentLoad recent_expert_load(std::int32_t windows) const;
  // The periodic rebalancing setting shown as meta.rebalance (null: off).
  void set_rebalance(nlohmann::json setting) { rebalance_ = std::move(setting); }
  // Publishes meta now (after a change) rather than at the next window.
  void publish_meta();
  // One control event: {"t_ns", "cmd", "request", "old", "new", "ok", "error"}.
  void publish_control(nlohmann::json event);
  // A process of the deployment was found dead: the control event `rank_lost` (which a flight
  // recorder may trigger on) and the meta that shows it.
  void rank_lost(std::int32_t rank, const std::string& why);
  // The run's description for a recording's META table.
  std::map<std::string, std::string> recording_metadata() const;
  void set_workload(nlohmann::json workload) { info_.workload = std::move(workload); }
  const nlohmann::json& workload() const { return info_.workload; }
  // Publishes the summary of the window so far and flushes the hub (end of a run).
  void finish();

  // RuntimeObserver
  void on_execution(std::int32_t device, LayerKind kind, std::int32_t block, std::int32_t index, std::int32_t group,
                    std::int64_t tokens, std::int64_t start_ns, std::int64_t end_ns) override;
  void on_shared_expert(std::int32_t device, std::int32_t block, std::int32_t group, std::int64_t tokens,
                        std::int64_t start_ns, std::int64_t end_ns) override;
  void on_merge(std::int32_t device, std::int32_t block, std::int64_t tokens, std::int64_t start_ns,
                std::int64_t end_ns) override;
  void on_stall(std::int32_t device, StallReason reason, std::int64_t start_ns, std::int64_t end_ns) override;
  void on_weight_fetch(std::int32_t device, std::int32_t source, std::int32_t block, std::int32_t expert,
                       std::int64_t bytes, std::int64_t start_ns, std::int64_t end_ns) override;
  void on_routed(std::int32_t block, std::int32_t expert, std::int32_t device, std::int64_t tokens,
                 std::int64_t at_ns) override;
  void on_queue_wait(std::int32_t device, const LayerId& queue, std::int64_t tokens, std::int64_t waited_ns,
                     std::int64_t at_ns) override;
  void on_transfer(std::int32_t src, std::int32_t dst, std::int64_t tokens, std::int64_t bytes, std::int64_t start_ns,
                   std::int64_t end_ns) override;
  // RequestObserver
  void on_request(const RequestUpdate& update) override;

 private:
  void sample_queues();
  void close_load_window();
  void close_summary_window();
  nlohmann::json summary(std::int64_t t_begin, std::int64_t t_end);
  telemetry::Producer& producer(std::int32_t device) { return *devices_[static_cast<std::size_t>(device)]; }

  Deployment& d_;
  telemetry::TelemetryHub& hub_;
  telemetry::ServingMetrics* prometheus_;
  RunInfo info_;
  Options options_;
  std::vector<telemetry::Producer*> devices_;
  telemetry::Producer* requests_ = nullptr;
  std::int64_t wall_origin_unix_ns_ = 0;
  // Shared with the periodic events: false once this bridge is gone.
  std::shared_ptr<bool> alive_;

  // μ-queues that were non-empty at the last sample, per device (to report them draining to 0).
  std::vector<std::vector<LayerId>> last_nonzero_;
  // Expert load: [block][expert][device] tokens in the open load window and in the open
  // summary window; the last complete summary window's totals.
  std::vector<std::int64_t> load_window_, summary_load_, last_summary_load_;
  std::int64_t load_window_start_ = 0;
  std::int64_t summary_start_ = 0;
  std::int64_t last_window_ns_ = 0;
  // The last kLoadHistory summary windows' tokens per (block, expert), newest last.
  struct LoadWindow {
    std::vector<std::int64_t> tokens;  // [block * experts + expert]
    std::int64_t ns = 0;
  };
  std::deque<LoadWindow> load_history_;
  nlohmann::json rebalance_;
  // Each running request's arrival and last token time (latencies).
  std::unordered_map<std::int64_t, std::int64_t> last_token_ns_;
  std::unordered_map<std::int64_t, std::int64_t> arrival_ns_;
  // The open summary window, accumulated as events arrive (a window costs what happened in
  // it, however long the run has been going).
  struct DeviceWindow {
    std::int64_t busy_ns = 0;
    std::array<std::int64_t, kStallReasons.size()> stall_ns{};  // by kStallReasons position
    std::int64_t executions = 0;
    std::int64_t rows = 0;
    // Where async loses (issue 17): shipments it sent and the head-of-line wait of its queue takes.
    std::int64_t transfers = 0;
    std::int64_t transfer_rows = 0;
    std::int64_t queue_takes = 0;
    std::int64_t queue_wait_ns = 0;
    std::int64_t queue_wait_max_ns = 0;
  };
  std::vector<DeviceWindow> window_;
  // Publishes a compute-lane span and counts it as busy time; returns the device's window.
  DeviceWindow& compute_span(telemetry::SpanKind kind, std::int32_t device, std::int32_t block, std::int32_t index,
                             std::int32_t group, std::int64_t tokens, std::int64_t start_ns, std::int64_t end_ns);
  std::vector<double> itl_ns_, ttft_ns_;
  std::int64_t window_tokens_ = 0, window_finished_ = 0, window_rejected_ = 0;
  std::pair<std::int64_t, std::int64_t> prefix_at_window_start_{0, 0};  // the coordinator's prefix cache counters
};

}  // namespace sy
