#include "engine/serving/cpu_deployment.h"

#include "engine/serving/skew_router.h"

namespace sy {
namespace {

Cluster::ExecutorFactory cpu_executors(std::shared_ptr<const ModelWeights> weights, const DeploymentOptions& options,
                                       RoutingRecorder record_routing) {
  RoutingOverride routing;
  if (options.skew_lambda) {
    // The executors' copies of `routing` keep the router alive.
    auto router = std::make_shared<SkewRouter>(weights->config().num_layers, weights->config().num_experts,
                                               *options.skew_lambda, options.skew_seed);
    routing = [router](std::int32_t block, std::int64_t request, std::int32_t position, std::int32_t k,
                       std::int32_t* ids, float* w) { router->route(block, skew_token_key(request, position), k, ids, w); };
  }
  return [weights, cost = options.cost_model.get(), kv_pages = options.kv_pages_per_rank,
          page_size = options.page_size, routing, record_routing](std::int32_t, bool attention_rank) {
    CpuExecutorOptions o;
    o.attention_rank = attention_rank;
    o.kv_pages = kv_pages;
    o.page_size = page_size;
    o.cost_model = cost;
    o.routing = routing;
    o.record_routing = record_routing;
    return std::unique_ptr<Executor>(std::make_unique<CpuExecutor>(weights, o));
  };
}

}  // namespace

CpuDeployment::CpuDeployment(std::shared_ptr<const ModelWeights> weights, Topology topology, DeploymentOptions options,
                             RoutingRecorder record_routing)
    // float32 activations cross the links.
    : Deployment(std::move(topology), options, static_cast<std::int64_t>(weights->config().hidden_size) * 4,
                 cpu_executors(weights, options, std::move(record_routing))) {}

}  // namespace sy
