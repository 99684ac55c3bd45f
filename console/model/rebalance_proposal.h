// The console's side of expert rebalancing (docs/control-protocol.md, `rebalance` and
// `set_rebalance`): a proposal reply read for the preview, and the commands that ask for one,
// apply exactly the one previewed, and set the periodic rebalancer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "console/model/run_meta.h"

namespace sy::console {

struct RebalanceProposal {
  std::int64_t id = 0;       // what `rebalance` with "proposal": id applies
  std::string algorithm;     // greedy | eplb
  Placement placement;       // the proposed placement
  std::vector<double> before, after;  // the engine's predicted tokens per device
  double imbalance_before = 1, imbalance_after = 1;  // Σ max / Σ mean over the layers
  double gain = 0;           // predicted drop of the layers' bottleneck load, a fraction
  std::int32_t slots_per_device = 0, replicas_before = 0, replicas_after = 0;  // (not `slots`: a Qt macro)
  std::int32_t changes = 0;  // (block, expert) whose devices change

  // "eplb: max/mean 1.42 → 1.05 (gain 26 %), 32 → 48 replicas, 20 experts change".
  std::string describe() const;
};

// Reads a successful `rebalance` preview reply; the error names the missing or mistyped field.
StatusOr<RebalanceProposal> parse_rebalance_reply(const nlohmann::json& reply);

// {"cmd":"rebalance","algorithm":…} (a preview, nothing applied).
std::string rebalance_preview_request(const std::string& algorithm);
// {"cmd":"rebalance","apply":true,"proposal":id}: exactly the previewed proposal.
std::string rebalance_apply_request(const RebalanceProposal& proposal);
// {"cmd":"set_rebalance","mode":"periodic",…} or {"cmd":"set_rebalance","mode":"off"}.
std::string set_rebalance_request(bool periodic, double interval_s, double threshold, const std::string& algorithm);

}  // namespace sy::console
