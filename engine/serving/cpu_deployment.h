// A whole deployment on the cpu backend: virtual devices (one CpuExecutor each) wired by the
// runtime, a coordinator and metrics, on one virtual-time event loop. What `switchyard
// generate --layout` and `switchyard bench` run, and what the runtime tests drive.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/backend/cost_model.h"
#include "engine/backend/cpu_executor.h"
#include "engine/model/model_weights.h"
#include "engine/runtime/cluster.h"
#include "engine/runtime/event_loop.h"
#include "engine/runtime/topology.h"
#include "engine/serving/coordinator.h"
#include "engine/serving/metrics.h"
#include "engine/serving/workload.h"

namespace sy {

struct DeploymentOptions {
  RuntimePolicy policy;
  CoordinatorOptions coordinator;
  LinkModel link;
  std::shared_ptr<const CostModel> cost_model;  // null: executions take their measured time
  std::optional<double> skew_lambda;            // routing-skew override exp(-λ·rank)
  std::uint64_t skew_seed = 0;
  std::int32_t kv_pages_per_rank = 4096;
  std::int32_t page_size = 16;
};

class CpuDeployment {
 public:
  CpuDeployment(std::shared_ptr<const ModelWeights> weights, Topology topology, DeploymentOptions options);
  ~CpuDeployment();

  void submit(std::vector<RequestSpec> requests);
  // Runs until every submitted request has finished or been rejected; returns the end time.
  std::int64_t run();

  VirtualEventLoop& loop() { return loop_; }
  Coordinator& coordinator() { return coordinator_; }
  Cluster& cluster() { return *cluster_; }
  MetricsCollector& metrics() { return metrics_; }

 private:
  VirtualEventLoop loop_;
  MetricsCollector metrics_;
  Coordinator coordinator_;
  std::unique_ptr<Cluster> cluster_;
  DeploymentOptions options_;
  std::shared_ptr<void> skew_;  // keeps the routing override's state alive
};

}  // namespace sy
