#include "engine/serving/cpu_deployment.h"

#include "engine/serving/skew_router.h"

namespace sy {

CpuDeployment::CpuDeployment(std::shared_ptr<const ModelWeights> weights, Topology topology,
                             DeploymentOptions options)
    : coordinator_(loop_, options.coordinator, &metrics_),
      options_(std::move(options)) {
  metrics_.set_device_names(topology.device_names);
  RoutingOverride routing;
  if (options_.skew_lambda) {
    auto router = std::make_shared<SkewRouter>(weights->config().num_layers, weights->config().num_experts,
                                               *options_.skew_lambda, options_.skew_seed);
    skew_ = router;
    routing = [router](std::int32_t block, std::uint64_t key, std::int32_t k, std::int32_t* ids, float* w) {
      router->route(block, key, k, ids, w);
    };
  }
  const CostModel* cost = options_.cost_model.get();
  auto factory = [&, weights, cost, routing](std::int32_t, bool attention_rank) -> std::unique_ptr<Executor> {
    CpuExecutorOptions o;
    o.attention_rank = attention_rank;
    o.kv_pages = options_.kv_pages_per_rank;
    o.page_size = options_.page_size;
    o.cost_model = cost;
    o.routing = routing;
    return std::make_unique<CpuExecutor>(weights, o);
  };
  const std::int64_t bytes_per_row = static_cast<std::int64_t>(weights->config().hidden_size) * 4;
  cluster_ = std::make_unique<Cluster>(std::move(topology), loop_, factory, options_.link, bytes_per_row,
                                       &metrics_, coordinator_.hooks());
  coordinator_.attach(*cluster_, options_.policy);
}

CpuDeployment::~CpuDeployment() = default;

void CpuDeployment::submit(std::vector<RequestSpec> requests) {
  for (auto& r : requests) coordinator_.submit(std::move(r));
}

std::int64_t CpuDeployment::run() {
  loop_.run([this] { return coordinator_.done() && cluster_->quiescent(); });
  cluster_->flush_stalls();
  return loop_.now();
}

}  // namespace sy
