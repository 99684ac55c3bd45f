// Expert rebalancing planners: from the recent per-(block, expert) load and the current placement,
// propose a placement that evens the expert load over the devices, with its predicted per-device
// load before and after. Pure functions of their inputs; the engine applies a proposal through
// set_placement's safe-point path (control command `rebalance`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/runtime/placement.h"

namespace sy {

enum class RebalanceAlgorithm {
  // MegaScale-Infer §6 "Load balance": on-device redundancy for hot experts, greedily, from the
  // current placement (replicas are only added, nothing moves).
  Greedy,
  // DeepSeek EPLB: replicate the heaviest experts into every redundant slot, then pack all
  // replicas onto the devices by load, each device the same number of slots.
  Eplb,
};

std::string_view rebalance_algorithm_name(RebalanceAlgorithm a);
// "greedy" or "eplb"; the error lists both.
StatusOr<RebalanceAlgorithm> parse_rebalance_algorithm(std::string_view name);

struct RebalanceInputs {
  Placement current;
  // [block][expert] tokens routed in the recent windows; a block may be empty (dense, or no
  // load seen), which keeps its current placement.
  std::vector<std::vector<double>> load;
  // Devices that may hold experts (the expert devices of the deployment), ascending.
  std::vector<std::int32_t> devices;
  std::int32_t num_devices = 0;  // every device of the deployment (sizes the per-device loads)
  // Expert replicas one device may hold per block (its expert-weight memory). Must be at least
  // what each device holds now (Greedy) and cover every expert once (both).
  std::int32_t slots_per_device = 0;
  // MegaScale-Infer's K: the least one replica costs, in tokens per window. A replica is
  // charged max(load / replicas, K): it reads its weights however few tokens it gets.
  double min_load = 0;
};

struct RebalanceProposal {
  RebalanceAlgorithm algorithm = RebalanceAlgorithm::Greedy;
  Placement placement;
  // Predicted tokens per device (all blocks together), replicas of an expert taking an even
  // share of its tokens (the dispatcher spreads rows over replicas by a hash).
  std::vector<double> load_before, load_after;
  // Σ_b max_d L(b,d) / Σ_b mean_d L(b,d) over the expert devices: how much longer the slowest
  // device of each layer takes than the average one, 1 when perfectly even.
  double imbalance_before = 1, imbalance_after = 1;
  // Predicted relative drop of Σ_b max_d L(b,d), the layers' bottleneck load: 1 − after/before.
  double gain = 0;
  std::int32_t replicas_before = 0, replicas_after = 0;  // over every block
  std::int32_t changed_experts = 0;                      // (block, expert) whose devices changed
};

// Predicted tokens per (block, device) of `placement` under `load`: [block][device].
std::vector<std::vector<double>> predicted_block_load(const Placement& placement,
                                                     const std::vector<std::vector<double>>& load,
                                                     std::int32_t num_devices);

// Validates the inputs (the message names the field and the problem) and plans. A block whose
// proposal would not lower its bottleneck cost (max over devices of Σ max(load/replicas, K))
// keeps its current placement, so a proposal is never predicted worse than the current
// placement by that measure; with min_load 0 that is the token load itself.
StatusOr<RebalanceProposal> plan_rebalance(RebalanceAlgorithm algorithm, const RebalanceInputs& in);

// The proposal as the `rebalance` control command reports it (docs/control-protocol.md):
// algorithm, placement, predicted loads, imbalance, gain, replica counts and the changed
// experts with their devices before and after.
nlohmann::json to_json(const RebalanceProposal& proposal, const Placement& current);

}  // namespace sy
