#include "engine/cli/backend_options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "engine/cli/cli_support.h"
#include "engine/cpu/cpu_deployment.h"
#include "engine/dist/device_ranks.h"
#include "engine/serving/memory_budget.h"
#include "engine/sim/calibration.h"
#include "engine/sim/sim_deployment.h"
#include "engine/sim/skew_router.h"
#if SY_HAVE_CUDA
#include "engine/cuda/cuda_deployment.h"
#endif

namespace sy::cli {
namespace {

namespace fs = std::filesystem;

// A directory holding config.json, a config.json itself, or a name under assets/models.
fs::path resolve_model_config(const std::string& model) {
  const fs::path p(model);
  if (fs::is_directory(p)) return p / "config.json";
  if (fs::is_regular_file(p)) return p;
  const fs::path named = assets_dir() / "models" / model / "config.json";
  if (fs::is_regular_file(named)) return named;
  std::string names;
  std::error_code ec;
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(assets_dir() / "models", ec))
    if (fs::is_regular_file(e.path() / "config.json")) found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  for (const auto& n : found) names += (names.empty() ? "" : ", ") + n;
  throw CommandError{"model '" + model + "' is neither a model directory, a config.json nor a model of " +
                     (assets_dir() / "models").string() + " (" + (names.empty() ? "none found" : names) + ")"};
}

}  // namespace

void load_cuda_modules_eagerly_under_launcher() {
#if SY_HAVE_CUDA
  // The driver reads the variable once, when CUDA starts (cuInit); a bad launcher variable is
  // the command's to report, later.
  const auto env = dist::RankEnvironment::from_process();
  if (env.ok() && env->distributed()) setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0);
#endif
}

std::unique_ptr<dist::DeviceLinks> cuda_device_links(const Layout& layout, const Topology& topology,
                                                     const dist::RankEnvironment& env, int gpu) {
#if SY_HAVE_CUDA
  // The devices' ranks as join() will assign them; a bad assignment is join()'s to report.
  auto ranks = dist::assign_device_ranks(layout, env.world);
  if (!ranks.ok()) return nullptr;
  // A rank's devices share one GPU (check_gpus refuses more, naming them): its first device's.
  for (std::size_t d = 0; d < ranks->size(); ++d)
    if ((*ranks)[d] == env.rank)
      return cuda_peer_links(
          d < topology.device_gpu.size() && topology.device_gpu[d] >= 0 ? topology.device_gpu[d] : gpu,
          env.bootstrap_timeout_s, env.heartbeat_timeout_s);
  // None here, yet links all the same: rank 0 makes every pair's NCCL ids (a rank 0 without
  // them would leave the ranks on different GPUs without ids, failing their join).
  return cuda_peer_links(-1, env.bootstrap_timeout_s, env.heartbeat_timeout_s);
#else
  (void)layout;
  (void)topology;
  (void)env;
  (void)gpu;
  return nullptr;
#endif
}

std::unique_ptr<Deployment> deploy_cuda(std::shared_ptr<const ModelWeights> weights, Topology topology,
                                        DeploymentOptions options, int gpu, bool cuda_graphs) {
#if SY_HAVE_CUDA
  // The layout's `gpu` keys where given, --gpu elsewhere.
  CudaDeploymentOptions cuda;
  cuda.device_gpu.assign(static_cast<std::size_t>(topology.num_devices), gpu);
  for (std::size_t d = 0; d < cuda.device_gpu.size() && d < topology.device_gpu.size(); ++d)
    if (topology.device_gpu[d] >= 0) cuda.device_gpu[d] = topology.device_gpu[d];
  cuda.cuda_graphs = cuda_graphs;
  return take(CudaDeployment::create(std::move(weights), std::move(topology), std::move(options), std::move(cuda)));
#else
  (void)weights;
  (void)topology;
  (void)options;
  (void)gpu;
  (void)cuda_graphs;
  throw CommandError{"--backend cuda: this build has no CUDA support (configured without nvcc, or with "
                     "SY_DISABLE_CUDA=ON)"};
#endif
}

void BackendOptions::add_to(CLI::App& app, bool with_both) {
  std::vector<std::string> clocks{"wall", "virtual"};
  if (with_both) clocks.push_back("both");
  app.add_option("--clock", clock,
                 with_both ? "cpu: wall (devices run concurrently on threads), virtual (measured durations on virtual "
                             "clocks, deterministic) or both side by side (default)"
                           : "cpu: wall (devices run concurrently on threads; default) or virtual (measured durations "
                             "on virtual clocks, deterministic)")
      ->check(CLI::IsMember(clocks));
  app.add_option("--backend", backend,
                 "cpu: real math on virtual devices; cuda: real math on a GPU, every device a worker with a CUDA "
                 "stream of its own; sim: a simulated cluster (no math)")
      ->check(CLI::IsMember({"cpu", "cuda", "sim"}))->capture_default_str();
  app.add_option("--gpu", gpu, "cuda: the GPU of the layout's devices that give no `gpu` key")
      ->check(CLI::Range(0, 1023))->capture_default_str();
  app.add_option("--cuda-graphs", cuda_graphs,
                 "cuda: on (decode attention as CUDA graphs, batches padded to 1, 2, 4, ..., 256 rows) or off "
                 "(every execution eagerly)")
      ->check(CLI::IsMember({"on", "off"}))->capture_default_str();
  app.add_option("--hardware", hardware,
                 "sim: device profile, a name from assets/hardware or a .toml file; cpu, cuda: the profile whose "
                 "[findep] table (switchyard calibrate) findep's solver plans with")
      ->capture_default_str();
  app.add_option("--devices-per-node", devices_per_node, "sim: devices sharing a node's NVLink; NICs between nodes")
      ->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--record-routing", record_routing, "cpu: write every token's experts to this routing trace");
  app.add_option("--routing", routing, "sim: replay the routing of this trace (recorded by a cpu run)");
}

Backend Backend::open(const BackendOptions& options, const std::string& model) {
  Backend b;
  b.options_ = options;
  if (options.backend == "sim") {
    if (!options.record_routing.empty()) throw CommandError{"--record-routing needs --backend cpu (the sim does not route)"};
    const fs::path config = resolve_model_config(model);
    b.config_ = take(ModelConfig::from_file(config));
    b.model_name_ = config.parent_path().filename().string();
    b.hardware_ = take(find_hardware_profile(options.hardware));
    if (!options.routing.empty()) {
      auto trace = std::make_shared<RoutingTrace>(take(RoutingTrace::load(options.routing)));
      const auto& s = trace->shape();
      const ModelConfig& c = b.config_;
      if (s.num_layers != c.num_layers || s.num_experts != c.num_experts || s.top_k != c.top_k)
        throw CommandError{options.routing.string() + ": recorded for " + std::to_string(s.num_layers) + " layers, " +
                           std::to_string(s.num_experts) + " experts, top-" + std::to_string(s.top_k) + "; model " +
                           model + " has " + std::to_string(c.num_layers) + ", " + std::to_string(c.num_experts) +
                           ", top-" + std::to_string(c.top_k)};
      b.replay_ = std::move(trace);
    }
    b.findep_costs_ = findep_cost_basis(b.config_, &*b.hardware_, options.hardware, true);
    return b;
  }
  if (!options.routing.empty()) throw CommandError{"--routing replays on --backend sim; a cpu run routes with its model"};
  if (options.backend == "cuda") {
    if (!options.record_routing.empty()) throw CommandError{"--record-routing needs --backend cpu"};
#if SY_HAVE_CUDA
    // Before the weights are read: a machine without a usable GPU fails at once, saying why.
    if (const std::string problem = cuda_backend_problem(); !problem.empty())
      throw CommandError{"--backend cuda: no usable GPU (" + problem + ")"};
#else
    throw CommandError{"--backend cuda: this build has no CUDA support (configured without nvcc, or with "
                       "SY_DISABLE_CUDA=ON)"};
#endif
  }
  b.weights_ = load_model(model);
  b.config_ = b.weights_->config();
  b.model_name_ = fs::path(model).filename().string();
  if (!options.record_routing.empty()) {
    const ModelConfig& c = b.config_;
    b.recording_ = std::make_shared<RoutingTrace>(RoutingTrace::Shape{c.num_layers, c.num_experts, c.top_k});
  }
  // cpu: the --hardware profile is only findep's cost basis; one that does not load leaves
  // the solver without one (it says why when asked), the run itself is unaffected.
  auto profile = find_hardware_profile(options.hardware);
  b.findep_costs_ = findep_cost_basis(b.config_, profile.ok() ? &*profile : nullptr,
                                      profile.ok() ? options.hardware : profile.status().message(), false);
  return b;
}

std::shared_ptr<const FindepCostBasis> Backend::findep_cost_basis(const ModelConfig& config,
                                                                  const HardwareProfile* profile,
                                                                  const std::string& name_or_error, bool sim) {
  auto basis = std::make_shared<FindepCostBasis>();
  basis->config = config;
  if (!profile) {
    basis->source = "--hardware: " + name_or_error;
  } else if (profile->findep) {
    basis->primitives = *profile->findep;
    basis->source = "the " + profile->name + " profile's [findep] table";
  } else {
    basis->primitives = findep_primitives_from_roofline(*profile);
    basis->source = "derived from the " + profile->name + " profile's roofline";
  }
  // The cpu backend measures its executions: without a calibrated table (switchyard calibrate,
  // then --hardware FILE) the models describe a GPU, not this host.
  if (!sim && profile && !profile->findep) basis->source += " (no calibrated [findep] table: a GPU's, not this host's)";
  return basis;
}

Clock Backend::clock() const {
  if (sim()) return Clock::Virtual;
  if (cuda()) return Clock::Wall;
  return options_.clock == "virtual" ? Clock::Virtual : Clock::Wall;
}

std::string Backend::describe(std::int32_t devices) const { return describe(devices, clock()); }

std::string Backend::describe(std::int32_t devices, Clock clock) const {
  if (cuda())
    return "cuda: " + std::to_string(devices) + " devices on gpu " + std::to_string(options_.gpu) +
           ", each a worker with a CUDA stream of its own (wall clock)";
  if (!sim()) {
    if (clock == Clock::Wall)
      return "cpu: " + std::to_string(devices) + " devices, each on a thread of its own (wall clock)";
    return "cpu: " + std::to_string(devices) + " virtual devices (each execution lasts its measured time; virtual clock)";
  }
  return "sim: " + std::to_string(devices) + "× " + hardware_->name + " (roofline; " +
         std::to_string(options_.devices_per_node) + " devices per node)";
}

std::unique_ptr<dist::DeviceLinks> Backend::device_links(const Layout& layout, const Topology& topology,
                                                         const dist::RankEnvironment& env) const {
  return cuda() ? cuda_device_links(layout, topology, env, options_.gpu) : nullptr;
}

std::unique_ptr<Deployment> Backend::deploy(Topology topology, DeploymentOptions options) const {
  // Before anything is allocated: a layout beyond this machine is an error naming its keys.
  check(check_host_memory(config_, topology, options.kv_pages_per_rank, options.page_size,
                          /*host_kv=*/!sim() && !cuda()));
  if (!options.findep_costs) options.findep_costs = findep_costs_;
  if (cuda()) return deploy_cuda(weights_, std::move(topology), std::move(options), options_.gpu,
                                    options_.cuda_graphs == "on");
  if (sim()) {
    options.clock = Clock::Virtual;
    options.routing_trace = replay_;
    if (options.link.bytes_per_ns == 0 && options.link.latency_ns == 0)
      options.link = profile_links(*hardware_, options_.devices_per_node);
    return std::make_unique<SimDeployment>(config_, *hardware_, std::move(topology), std::move(options));
  }
  RoutingRecorder record;
  if (recording_) {
    record = [trace = recording_](std::int32_t block, std::int64_t request, std::int32_t position, std::int32_t,
                                  const std::int32_t* ids) { trace->add(block, request, position, ids); };
  }
  return std::make_unique<CpuDeployment>(weights_, std::move(topology), std::move(options), std::move(record));
}

std::optional<TraceReplay> Backend::trace_replay(const Deployment& deployment) const {
  const auto* sim = dynamic_cast<const SimDeployment*>(&deployment);
  if (!replay_ || !sim) return std::nullopt;
  // The λ at the end: demo's set_workload may have changed it during the run.
  const double lambda = deployment.options().skew_routing ? deployment.options().skew_routing->lambda() : 0.0;
  char fallback[64] = "uniform routing";
  if (lambda > 0) std::snprintf(fallback, sizeof fallback, "the skew model exp:%g", lambda);
  return TraceReplay{sim->trace_lookups(), sim->trace_misses(), fallback};
}

std::string Backend::describe(const TraceReplay& replay) const {
  const std::string head = "routing trace " + options_.routing.string() + ": ";
  if (replay.misses == 0) return head + "all " + std::to_string(replay.routed) + " routed tokens found in the trace";
  return head + std::to_string(replay.misses) + " of " + std::to_string(replay.routed) +
         " routed tokens not in the trace fell back to " + replay.fallback;
}

RunInfo Backend::run_info() const {
  RunInfo info;
  info.backend = sim() ? "sim" : cuda() ? "cuda" : "cpu";
  info.hardware = sim() ? hardware_->name : "";
  info.model_name = model_name_;
  info.model = config_;
  info.devices_per_node = sim() ? options_.devices_per_node : 0;
  // The sim ships bf16 rows between devices, the cpu backend float32 ones.
  info.row_bytes = static_cast<std::int64_t>(config_.hidden_size) * (sim() ? 2 : 4);
  return info;
}

void Backend::finish() const {
  if (!recording_) return;
  check(recording_->write(options_.record_routing));
  std::fprintf(stderr, "recorded the routing of %zu tokens to %s\n", recording_->size(),
               options_.record_routing.string().c_str());
}

}  // namespace sy::cli
