// Which devices hold a copy of each expert of each MoE block, and the checks a layout's
// placement passes.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/model/model_config.h"

namespace sy {

struct BlockExpert {
  std::int32_t block = 0;
  std::int32_t expert = 0;
  bool operator==(const BlockExpert&) const = default;
};

// For every MoE block and expert, the devices holding a copy of it. Blocks are all the model's
// layers; dense blocks have no experts. Device lists are kept sorted and free of duplicates, so
// two placements compare equal exactly when they place the same copies.
class Placement {
 public:
  Placement() = default;
  Placement(std::int32_t num_blocks, std::int32_t num_experts, std::vector<bool> sparse);
  explicit Placement(const ModelConfig& config);

  std::int32_t num_blocks() const { return static_cast<std::int32_t>(sparse_.size()); }
  std::int32_t num_experts() const { return num_experts_; }
  bool is_sparse(std::int32_t block) const { return sparse_[static_cast<std::size_t>(block)]; }

  // Devices holding `expert` in `block`, ascending; empty for a dense block. The block and
  // expert must be in range (asserted).
  const std::vector<std::int32_t>& devices(std::int32_t block, std::int32_t expert) const;
  bool holds(std::int32_t block, std::int32_t expert, std::int32_t device) const;
  // Every (block, expert) a device holds, by block then expert.
  std::vector<BlockExpert> experts_on(std::int32_t device) const;

  // Replaces the copies of one expert in one block. Refuses a dense or out-of-range block, an
  // out-of-range expert, a negative device index and a device listed twice; an empty list is
  // accepted here and refused by validate() (the expert would be placed nowhere).
  Status set(std::int32_t block, std::int32_t expert, std::vector<std::int32_t> devices);
  // Adds one copy; refuses the same things as set(), and a device that already holds it.
  Status add(std::int32_t block, std::int32_t expert, std::int32_t device);

  // Every expert of every sparse block is placed somewhere and every device index is below
  // num_devices. The message names the block and expert.
  Status validate(std::int32_t num_devices) const;

  bool operator==(const Placement&) const = default;

 private:
  Status check_slot(std::int32_t block, std::int32_t expert) const;

  std::int32_t num_experts_ = 0;
  std::vector<bool> sparse_;                                  // [block]
  std::vector<std::vector<std::vector<std::int32_t>>> slots_;  // [block][expert] -> devices
};

}  // namespace sy
