// Which devices hold a copy of each expert of each MoE block: the one placement type of layouts,
// the runtime topology and live placement changes, with the checks all three rely on.
#pragma once

#include <cassert>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

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

  // `lists` is [block][expert] -> device indices, the JSON form of to_json(): one list per
  // block (empty for a dense block), one list per expert of a sparse block. Refuses anything
  // else with a message naming the block and expert, and what set() refuses; validate()
  // still has to check the result against the devices.
  static StatusOr<Placement> from_json(const nlohmann::json& lists, std::int32_t num_experts, std::vector<bool> sparse);
  nlohmann::json to_json() const;

  std::int32_t num_blocks() const { return static_cast<std::int32_t>(sparse_.size()); }
  std::int32_t num_experts() const { return num_experts_; }
  bool is_sparse(std::int32_t block) const { return sparse_[static_cast<std::size_t>(block)]; }

  // Devices holding `expert` in `block`, ascending; empty for a dense block. The block and
  // expert must be in range (asserted). Inline and branch-free: workers look it up per row.
  const std::vector<std::int32_t>& devices(std::int32_t block, std::int32_t expert) const {
    assert(block >= 0 && block < num_blocks() && expert >= 0 && expert < num_experts_);
    return slots_[static_cast<std::size_t>(block)][static_cast<std::size_t>(expert)];
  }
  // devices(block, e) for every expert e of the block, indexed by e: for loops over many rows
  // of one block, which then look an expert up with a single index.
  const std::vector<std::vector<std::int32_t>>& block_devices(std::int32_t block) const {
    assert(block >= 0 && block < num_blocks());
    return slots_[static_cast<std::size_t>(block)];
  }
  bool holds(std::int32_t block, std::int32_t expert, std::int32_t device) const;
  // Every (block, expert) a device holds, by block then expert.
  std::vector<BlockExpert> experts_on(std::int32_t device) const;
  // experts_on(d) for every d < num_devices, in one pass over the placement (asking each
  // device in turn visits every block's every expert once per device: 64 devices of qwen3
  // spent 45 M instructions there at start-up).
  std::vector<std::vector<BlockExpert>> experts_by_device(std::int32_t num_devices) const;

  // Replaces the copies of one expert in one block. Refuses a dense or out-of-range block, an
  // out-of-range expert, a negative device index and a device listed twice; an empty list is
  // accepted here and refused by validate() (the expert would be placed nowhere).
  Status set(std::int32_t block, std::int32_t expert, std::vector<std::int32_t> devices);
  // Adds one copy; refuses the same things as set(), and a device that already holds it.
  Status add(std::int32_t block, std::int32_t expert, std::int32_t device);

  // Whether this is a placement for a model of this shape: a block per entry of `sparse`, the
  // same blocks sparse, `num_experts` experts. The message names the first difference.
  Status check_shape(std::int32_t num_experts, const std::vector<bool>& sparse) const;
  // Every expert of every sparse block is placed somewhere and every device index is below
  // num_devices; the message names the block, the expert and the device that does not exist.
  // Repeated or negative devices need no check here: set() refuses them.
  Status validate(std::int32_t num_devices) const;

  bool operator==(const Placement&) const = default;

 private:
  Status check_slot(std::int32_t block, std::int32_t expert) const;

  std::int32_t num_experts_ = 0;
  std::vector<bool> sparse_;                                  // [block]
  // [block][expert] -> devices; dense blocks have their num_experts lists too (always empty),
  // so that devices() needs no test for them.
  std::vector<std::vector<std::vector<std::int32_t>>> slots_;
};

}  // namespace sy
