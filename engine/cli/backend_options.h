// The backend a serving command runs on (`--backend cpu|cuda|sim` and their options), and what
// it needs: model weights on cpu and cuda, only the model's shape and a hardware profile on sim.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/dist/device_links.h"
#include "engine/dist/rank_environment.h"
#include "engine/sim/routing_trace.h"
#include "engine/model/model_weights.h"
#include "engine/runtime/layout.h"
#include "engine/serving/deployment.h"
#include "engine/serving/telemetry_bridge.h"
#include "engine/sim/hardware_profile.h"

namespace sy::cli {

struct BackendOptions {
  std::string backend = "cpu";
  int gpu = 0;  // cuda: the GPU of devices whose layout entry has no `gpu` key
  std::string cuda_graphs = "on";  // cuda: decode attention as CUDA graphs (on) or eagerly (off)
  std::string hardware = "h100";
  std::int32_t devices_per_node = 8;
  std::filesystem::path record_routing;  // cpu: write the model's routing here
  std::filesystem::path routing;         // sim: replay this recorded routing
  // cpu: "wall" (devices on threads of their own, concurrently) or "virtual" (one after
  // another on virtual clocks, deterministic); bench also takes "both". Empty: the command's
  // default (wall; bench: both).
  std::string clock;

  // with_both: the command can run both clocks side by side (bench).
  void add_to(CLI::App& app, bool with_both = false);
};

// --backend cuda for a command that loads its weights itself (generate --prompts): the deployment
// on gpu `gpu`, decode attention as CUDA graphs or not, or a CommandError naming the problem
// (no GPU, no fit, a build without CUDA).
std::unique_ptr<Deployment> deploy_cuda(std::shared_ptr<const ModelWeights> weights, Topology topology,
                                        DeploymentOptions options, int gpu, bool cuda_graphs);

// A rank of a run under a launcher (world above 1) may join NCCL links to other ranks' GPUs:
// before anything starts CUDA, sets CUDA_MODULE_LOADING=EAGER (unless the environment sets it)
// so that every kernel, cuBLAS's included, is loaded when CUDA starts rather than at its first
// launch, which may wait for an NCCL kernel waiting for its peer (docs/architecture.md, "Lazy
// module loading"). No effect in a build without CUDA, nor on a backend that never starts it.
void load_cuda_modules_eagerly_under_launcher();

// Under a launcher with --backend cuda: NCCL between this rank's GPU (its devices' `gpu` key,
// else `gpu`) and the other ranks' GPUs, for dist::DistributedRun::join. A rank without
// devices gets links without a GPU (no memory, no pairs: as rank 0 it still makes the NCCL ids);
// null for a bad layout (join reports it) and in a build without CUDA (which refuses
// --backend cuda anyway).
std::unique_ptr<dist::DeviceLinks> cuda_device_links(const Layout& layout, const Topology& topology,
                                                     const dist::RankEnvironment& env, int gpu);

// What a sim run replaying --routing found: tokens routed (each once per MoE block it reached),
// those the trace lacked, and what routed those instead ("uniform routing", "the skew model
// exp:0.5").
struct TraceReplay {
  std::int64_t routed = 0;
  std::int64_t misses = 0;
  std::string fallback;
};

class Backend {
 public:
  // Opens the model for the chosen backend: a model directory on cpu; on sim a model directory,
  // a config.json, or a name from assets/models (weights are never read). Raises CommandError.
  static Backend open(const BackendOptions& options, const std::string& model);

  bool sim() const { return hardware_.has_value(); }
  bool cuda() const { return options_.backend == "cuda"; }
  const ModelConfig& config() const { return config_; }
  const std::string& model_name() const { return model_name_; }
  const HardwareProfile* hardware() const { return hardware_ ? &*hardware_ : nullptr; }
  // --routing: the trace a sim deployment replays (null without one).
  const RoutingTrace* routing_trace() const { return replay_.get(); }
  const std::filesystem::path& routing_file() const { return options_.routing; }
  // The replay of a deployment this backend made; nullopt without --routing. A replay of another
  // workload (or a longer run) falls back silently token by token: commands report this.
  std::optional<TraceReplay> trace_replay(const Deployment& deployment) const;
  // "routing trace FILE: N of M routed tokens not in the trace fell back to uniform routing".
  std::string describe(const TraceReplay& replay) const;
  // The clock a deployment runs on: sim always virtual; cpu as --clock says, wall by default.
  Clock clock() const;
  // "cpu: 6 devices on threads of their own (wall clock)" or "sim: 8× H100 (roofline)".
  std::string describe(std::int32_t devices) const;
  std::string describe(std::int32_t devices, Clock clock) const;

  // cuda_device_links() on cuda, else null.
  std::unique_ptr<dist::DeviceLinks> device_links(const Layout& layout, const Topology& topology,
                                                  const dist::RankEnvironment& env) const;
  // On options.clock for cpu (callers set it from clock() or choose one), virtual for sim.
  std::unique_ptr<Deployment> deploy(Topology topology, DeploymentOptions options) const;
  // What the telemetry metadata says about this backend and model.
  RunInfo run_info() const;
  // Writes the recorded routing (--record-routing); a no-op otherwise.
  void finish() const;
  // What findep's solver plans with on this backend: the --hardware profile's [findep] table,
  // else the models derived from its roofline (on cpu the latter describe a GPU, and say so).
  const std::shared_ptr<const FindepCostBasis>& findep_costs() const { return findep_costs_; }

 private:
  static std::shared_ptr<const FindepCostBasis> findep_cost_basis(const ModelConfig& config,
                                                                  const HardwareProfile* profile,
                                                                  const std::string& name_or_error, bool sim);
  BackendOptions options_;
  std::string model_name_;
  ModelConfig config_;
  std::shared_ptr<const ModelWeights> weights_;
  std::optional<HardwareProfile> hardware_;
  std::shared_ptr<const RoutingTrace> replay_;
  std::shared_ptr<RoutingTrace> recording_;
  std::shared_ptr<const FindepCostBasis> findep_costs_;
};

}  // namespace sy::cli
