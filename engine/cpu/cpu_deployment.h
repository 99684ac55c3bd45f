// A deployment on the cpu backend: virtual devices, each a CpuExecutor doing the real math on
// the host. What `switchyard generate --layout` and `switchyard bench` run, and what the
// runtime tests drive.
#pragma once

#include <memory>

#include "engine/cpu/cpu_executor.h"
#include "engine/model/model_weights.h"
#include "engine/serving/deployment.h"

namespace sy {

class CpuDeployment final : public Deployment {
 public:
  // record_routing, when set, sees every routing decision (switchyard --record-routing).
  CpuDeployment(std::shared_ptr<const ModelWeights> weights, Topology topology, DeploymentOptions options,
                RoutingRecorder record_routing = {});

 private:
  // options already carry their skew routing.
  CpuDeployment(std::shared_ptr<const ModelWeights> weights, Topology topology, DeploymentOptions options,
                RoutingRecorder record_routing, int);
};

}  // namespace sy
