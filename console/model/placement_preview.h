// The placement editor's preview: per-device expert load of the last window before and after
// moving or replicating an expert, or after a whole new placement (a rebalance proposal),
// assuming a replica takes an even share of its expert's tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "console/model/expert_load_store.h"
#include "console/model/run_meta.h"
#include "base/status.h"

namespace sy::console {

struct PlacementChange {
  enum class Kind { Move, Replicate };
  Kind kind = Kind::Move;
  std::int32_t block = -1;  // -1: every block
  std::int32_t expert = 0;
  std::int32_t from = -1;   // Move only
  std::int32_t to = 0;

  // The control command that applies it: move_expert or replicate_expert (docs/control-protocol.md).
  std::string command_json() const;
};

struct LoadPreview {
  std::vector<double> before;  // tokens per device in the window, as measured
  std::vector<double> after;   // after the change
  Placement placement_after;
};

// Errors name what is wrong with the change against the current placement (an unknown block,
// expert or device; `from` holds no replica; `to` already holds one).
StatusOr<LoadPreview> preview_placement(const Placement& placement, std::int32_t device_count,
                                                   const LoadWindow& window, const PlacementChange& change);

// The same preview for a whole new placement (a rebalance proposal): each expert's measured
// tokens in the window spread evenly over its replicas in `proposed`. Errors name a proposed
// placement of another shape than the current one, or a device that does not exist.
StatusOr<LoadPreview> preview_whole_placement(const Placement& current, const Placement& proposed,
                                              std::int32_t device_count, const LoadWindow& window);

}  // namespace sy::console
