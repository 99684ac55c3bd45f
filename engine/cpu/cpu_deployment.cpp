#include "engine/cpu/cpu_deployment.h"

#include <algorithm>
#include <mutex>

#include "engine/sim/skew_router.h"
#include "kernels/cpu/gemm.h"

namespace sy {
namespace {

Cluster::ExecutorFactory cpu_executors(std::shared_ptr<const ModelWeights> weights, const DeploymentOptions& options,
                                       std::int32_t devices, RoutingRecorder record_routing) {
  if (record_routing && options.clock == Clock::Wall) {
    // Device threads record concurrently; the recorder was written for one thread.
    record_routing = [inner = std::move(record_routing), mutex = std::make_shared<std::mutex>()](
                         std::int32_t block, std::int64_t request, std::int32_t position, std::int32_t k,
                         const std::int32_t* ids) {
      std::lock_guard lock(*mutex);
      inner(block, request, position, k, ids);
    };
  }
  RoutingOverride routing;
  if (options.skew_routing) {
    // The executors' copies of `routing` keep the router alive.
    routing = [router = options.skew_routing](std::int32_t block, std::int64_t request, std::int32_t position,
                                              std::int32_t k, std::int32_t* ids, float* w) {
      router->route(block, request, position, k, ids, w);
    };
  }
  // On the wall clock every device gets a thread; the kernels' threads are shared out so that
  // all devices together use the machine's threads once.
  return [weights, cost = options.cost_model.get(), kv_pages = options.kv_pages_per_rank,
          page_size = options.page_size, routing, record_routing,
          kernel_threads = std::max(1, kernels::num_threads() / std::max(1, devices))](std::int32_t device,
                                                                                          bool attention_rank,
                                                                                          EventLoop& loop) {
    CpuExecutorOptions o;
    o.attention_rank = attention_rank;
    o.kv_pages = kv_pages;
    o.page_size = page_size;
    o.cost_model = cost;
    o.routing = routing;
    o.record_routing = record_routing;
    return std::unique_ptr<Executor>(
        std::make_unique<CpuExecutor>(weights, o, make_device_stream(loop, device, kernel_threads)));
  };
}

DeploymentOptions with_skew_routing(DeploymentOptions o, const ModelConfig& config) {
  if (o.skew_lambda && !o.skew_routing)
    o.skew_routing = std::make_shared<SkewRouting>(config.num_layers, config.num_experts, *o.skew_lambda, o.skew_seed);
  return o;
}

}  // namespace

CpuDeployment::CpuDeployment(std::shared_ptr<const ModelWeights> weights, Topology topology, DeploymentOptions options,
                             RoutingRecorder record_routing)
    : CpuDeployment(weights, std::move(topology), with_skew_routing(std::move(options), weights->config()),
                    std::move(record_routing), 0) {}

CpuDeployment::CpuDeployment(std::shared_ptr<const ModelWeights> weights, Topology topology, DeploymentOptions options,
                             RoutingRecorder record_routing, int)
    // float32 activations cross the links.
    : Deployment(std::move(topology), options, static_cast<std::int64_t>(weights->config().hidden_size) * 4,
                 cpu_executors(weights, options, topology.num_devices, std::move(record_routing))) {}

}  // namespace sy
