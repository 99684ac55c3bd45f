// Deployment layouts: which devices run attention (DP ranks), which hold which experts (with
// replicas and per-block overrides), the default policy and the capacity limits; read from the
// TOML format documented in layouts/README.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/model/model_config.h"

namespace sy {

struct DeviceSpec {
  std::string name;
  bool attention = false;            // runs attention for one DP rank (owns a KV cache)
  std::int32_t attention_rank = -1;  // rank number (file order of attention devices), -1 if none
  bool holds_experts = false;        // holds at least one expert of some block

  bool operator==(const DeviceSpec&) const = default;
};

// The execution scheme and its parameters. Every field is kept whatever the policy, so that a
// live switch (e.g. sync -> async) has the scheduler parameters to hand.
struct PolicySpec {
  std::string policy = "async";   // async | pingpong | sync
  std::string scheduler = "defrag";  // defrag | mtfs | flfs (async)
  std::int32_t lookahead = 3;     // defrag: blocks looked ahead (K in AMoE Algorithm 1)
  double decay = 1.0;             // defrag: weight δ^k of the k-th block ahead, 0 < δ ≤ 1
  std::int32_t microbatches = 2;  // pingpong: m micro-batches, 1 ≤ m ≤ 64

  bool operator==(const PolicySpec&) const = default;

  // `changes` is a JSON object with any of the [policy] keys (name, scheduler, lookahead,
  // decay, microbatches), applied over `base`, e.g. a control command's
  // {"name": "pingpong", "microbatches": 4}. Unknown keys, wrong types and out-of-range
  // values are refused with a message naming them; the result is validated.
  static StatusOr<PolicySpec> from_json(const nlohmann::json& changes, const PolicySpec& base);
  static StatusOr<PolicySpec> from_json(const nlohmann::json& changes);  // over the defaults
  nlohmann::json to_json() const;
};

// Checks names and ranges; the message names the bad field and value. Shared by layout files
// and live policy switches so that both accept exactly the same things.
Status validate_policy(const PolicySpec& policy);

struct CapacitySpec {
  std::int32_t kv_pages_per_rank = 4096;  // KV-cache pages on each attention rank
  std::int32_t page_size = 16;            // token positions per KV page
  std::int32_t max_batch = 64;            // concurrent requests per attention rank

  bool operator==(const CapacitySpec&) const = default;
};

Status validate_capacity(const CapacitySpec& capacity);

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

struct Layout {
  std::string name;
  std::vector<DeviceSpec> devices;  // device index = position here (file order)
  Placement placement;
  PolicySpec policy;
  CapacitySpec capacity;

  std::int32_t num_devices() const { return static_cast<std::int32_t>(devices.size()); }
  std::int32_t num_attention_ranks() const;
  // Attention rank -> device index.
  std::vector<std::int32_t> attention_devices() const;
  // Index of the device with this name, or -1.
  std::int32_t device_index(std::string_view device_name) const;
  // A layout file that parse_layout() reads back into an equal Layout: one [[device]] per
  // device with the experts it holds in every sparse block, then an [[override]] for each
  // (block, expert) whose copies differ from that.
  std::string to_toml() const;

  bool operator==(const Layout&) const = default;
};

// Structural checks of a layout however it was made (file, constructor, live edit): device
// names unique and non-empty, at least one attention device, ranks numbered in order,
// holds_experts consistent with the placement, no device without a role, placement complete
// for the model, policy and capacity in range.
Status validate_layout(const Layout& layout, const ModelConfig& config);

// Parses layout TOML; `source` names the text in messages ("layouts/x.toml:12: ..."). Refuses
// syntax errors, unknown keys, wrong types, unknown or duplicate devices, bad expert or block
// ids, experts placed nowhere, devices without a role and bad policy or capacity values.
StatusOr<Layout> parse_layout(std::string_view text, const std::string& source, const ModelConfig& config);
StatusOr<Layout> load_layout(const std::filesystem::path& path, const ModelConfig& config);

// For tests and benchmarks. Devices are named gpu0, gpu1, ...; experts are spread round-robin
// (expert e on the (e mod n)-th expert device) in every sparse block.
// Colocated: every device runs attention and holds experts; policy sync.
Layout make_colocated_layout(std::int32_t devices, const ModelConfig& config);
// Disaggregated: `attention` attention-only devices, then `expert` expert-only devices;
// policy async/defrag. With `nodes` > 1 (dividing both counts), every node of consecutive
// devices holds its share of each kind, attention first, as a multi-node deployment would.
Layout make_disaggregated_layout(std::int32_t attention, std::int32_t expert, const ModelConfig& config,
                                 std::int32_t nodes = 1);

}  // namespace sy
