// Plans for a running deployment: which of them the runtime can apply live (micro-batches and
// batch size) and, for the others, what would have to change that cannot (device counts,
// tensor parallelism, a colocated layout). The `plan` and `apply_plan` control commands use it.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/plan/plan_search.h"
#include "engine/runtime/topology.h"

namespace sy {

struct LiveDeployment {
  std::int32_t attention_devices = 0;  // attention (DP) ranks
  std::int32_t expert_devices = 0;     // devices that hold experts and are no attention rank
  bool colocated = false;              // some attention rank also holds routed experts
  std::int32_t microbatches = 0;       // the ping-pong m now (its target after a pending switch)
  std::string policy;
  std::int32_t max_batch_per_rank = 0;

  static LiveDeployment of(const Topology& topology, const std::string& policy, std::int32_t microbatches,
                           std::int32_t max_batch_per_rank);
  nlohmann::json to_json() const;
};

// Empty when `shape` can be applied to `live` without changing its devices; otherwise every
// part that cannot change live, e.g. "n_a: 6 attention devices, the deployment has 4".
std::string live_refusal(const LiveDeployment& live, const PlanShape& shape);

// The best plans for the running device counts (every m, its largest batch) first, then the
// best of the whole search; each with "applicable" and, when not, "refused" (the reason).
nlohmann::json live_plans(const PlanInputs& in, const LiveDeployment& live, std::int32_t top);

// A plan object as `live_plans` returns it (its n_a, n_e, tp_a, tp_e, m, b_a; other fields are
// ignored); errors name the missing or bad field.
StatusOr<PlanShape> plan_shape_from_json(const nlohmann::json& plan);

}  // namespace sy
