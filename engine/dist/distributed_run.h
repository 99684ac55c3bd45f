// One process's part in a deployment spread over the ranks a launcher started: what a serving
// command calls to join the others (bootstrap), to set up its deployment for its rank, and to
// serve (the other ranks) or to end the run (rank 0). Without a launcher there is none and the
// command runs in one process as always.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/dist/bootstrap.h"
#include "engine/dist/device_links.h"
#include "engine/dist/event_relay.h"
#include "engine/dist/process_group.h"
#include "engine/dist/process_links.h"
#include "engine/dist/rank_environment.h"
#include "engine/runtime/layout.h"
#include "engine/runtime/topology.h"
#include "engine/serving/deployment.h"

namespace sy::dist {

// What a rank runs, for the bootstrap's comparison: the model directory (config.json and its
// weight files' names and sizes), the layout (its text and the rank of every device) and the
// command's options that must agree.
RunIdentity run_identity(const std::filesystem::path& model_dir, const Layout& layout,
                         const std::vector<std::int32_t>& device_ranks, const std::string& command);

class DistributedRun {
 public:
  // Null without a launcher (or a world of one). Otherwise assigns devices to ranks, joins the
  // other ranks and records the assignment in `topology`. Errors name what went wrong. With
  // device_links (the cuda backend's NCCL between ranks on different GPUs) the bootstrap
  // exchanges what they need and they connect before this returns; the run keeps them.
  static StatusOr<std::unique_ptr<DistributedRun>> join(const RankEnvironment& env, const Layout& layout,
                                                        const std::filesystem::path& model_dir,
                                                        const std::string& command, Topology& topology,
                                                        std::unique_ptr<DeviceLinks> device_links = nullptr);
  ~DistributedRun();

  std::int32_t rank() const { return env_.rank; }
  std::int32_t world() const { return env_.world; }
  bool runs_coordinator() const { return env_.rank == 0; }
  const RankEnvironment& environment() const { return env_; }
  // "rank 1 of 3 (mpirun, pid 4242): devices gpu2, gpu3"
  std::string describe(const Topology& topology) const;

  // Which rank runs each device, into a topology made after join().
  void place(Topology& topology) const { topology.device_process = device_ranks_; }
  // This rank's transport and devices, before the deployment is made.
  void configure(DeploymentOptions& options, std::int64_t bytes_per_row);
  // After the deployment is made: wires the ranks' control protocol and starts receiving. A
  // command that serves several deployments one after another (bench) attaches each in turn,
  // every rank in the same order, after the previous one's serve() or finish().
  void attach(Deployment& deployment);
  // Ranks other than 0: runs this rank's workers until rank 0 ends the run.
  void serve(Deployment& deployment);
  // Ranks other than 0, on the loop: stop serving without rank 0's word (this process was told
  // to end); rank 0 then counts this rank as dead.
  void leave();
  // Ranks other than 0: whether rank 0 has not ended the run yet.
  bool serving() const { return group_ && group_->open(); }
  // Rank 0, after its run: tells the other ranks to stop, then detach().
  void finish();
  // Stops receiving (nothing more is posted to the deployment's loop). Before the deployment
  // is destroyed; serve() and finish() do it.
  void detach();
  // Why the run could not complete (a rank died); empty when it could.
  const std::string& failure() const { return failure_; }
  // Rank 0, on the loop: every rank's state, devices and clock offset to rank 0 (the telemetry
  // meta's `processes`): [{"rank", "state": "alive"|"dead", "reason", "devices",
  // "clock_offset_us", "clock_error_us"}], offsets null until measured.
  nlohmann::json processes() const;
  // Rank 0: told on the loop when a rank is found dead, after its requests have failed (the
  // telemetry publishes it; a flight recorder may dump on it).
  void on_rank_lost(std::function<void(std::int32_t rank, const std::string& why)> fn) { on_lost_ = std::move(fn); }

 private:
  DistributedRun(RankEnvironment env, std::vector<std::int32_t> device_ranks, std::unique_ptr<ProcessLinks> links,
                 std::unique_ptr<DeviceLinks> device_links);
  // On the loop: a watched rank fell silent.
  void lost(std::int32_t rank, const std::string& why);

  RankEnvironment env_;
  std::vector<std::int32_t> device_ranks_;
  std::unique_ptr<DeviceLinks> device_links_;  // before links_: the receiver thread uses it
  std::unique_ptr<ProcessLinks> links_;
  std::unique_ptr<ProcessGroup> group_;
  std::unique_ptr<EventRelay> relay_;  // ranks other than 0
  std::uint32_t runs_ = 0;             // deployments attached so far
  Deployment* deployment_ = nullptr;
  std::string failure_;
  std::vector<std::string> dead_;  // [rank]: why it was found dead; empty while alive
  std::function<void(std::int32_t, const std::string&)> on_lost_;
};

}  // namespace sy::dist
