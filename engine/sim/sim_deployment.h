// A deployment on the sim backend: the same workers, queues, policies and coordinator as the
// cpu backend, with executors that only take the time a device profile's roofline says.
#pragma once

#include <memory>

#include "engine/sim/roofline_cost_model.h"
#include "engine/sim/routing_trace.h"
#include "engine/sim/sim_executor.h"
#include "engine/model/model_config.h"
#include "engine/serving/deployment.h"
#include "engine/sim/hardware_profile.h"

namespace sy {

// Links of a profile: NVLink (or PCIe) within a node of `devices_per_node`, the NIC between
// nodes, each device's ports shared by its transfers.
LinkModel profile_links(const HardwareProfile& hw, std::int32_t devices_per_node);

class SimDeployment final : public Deployment {
 public:
  // options.cost_model, when null, becomes the roofline of `hw` for this model; routing comes
  // from options.routing_trace (first) and the skew model (options.skew_lambda, default 0:
  // uniform).
  SimDeployment(const ModelConfig& config, const HardwareProfile& hw, Topology topology, DeploymentOptions options);

  // Over all devices: tokens looked up in options.routing_trace (once per MoE block each
  // reached), and those the trace lacked, which were routed by the skew model instead.
  std::int64_t trace_lookups() const;
  std::int64_t trace_misses() const;

 private:
  SimDeployment(const ModelConfig& config, const HardwareProfile& hw, DeploymentOptions options, Topology topology,
                std::shared_ptr<std::vector<const SimExecutor*>> executors);
  std::shared_ptr<std::vector<const SimExecutor*>> executors_;
};

}  // namespace sy
