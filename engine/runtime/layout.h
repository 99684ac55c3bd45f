// Deployment layouts: which devices run attention (DP ranks), which hold which experts (with
// replicas and per-block overrides), the default policy and the capacity limits, and the checks
// that make one whole. The TOML format (layouts/README.md) is read by layout_parser.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/model/model_config.h"
#include "engine/runtime/capacity_spec.h"
#include "engine/runtime/placement.h"
#include "engine/runtime/policy_spec.h"

namespace sy {

struct DeviceSpec {
  std::string name;
  bool attention = false;            // runs attention for one DP rank (owns a KV cache)
  std::int32_t attention_rank = -1;  // rank number (file order of attention devices), -1 if none
  bool holds_experts = false;        // holds at least one expert of some block
  // The `rank` key: which process of a multi-process deployment (its launcher rank) hosts the
  // device; -1 when the file does not say (devices are then split evenly over the ranks).
  std::int32_t process = -1;
  // The `memory_gb` key: the device's memory in GB (10^9 bytes), against which the expert
  // weights it holds and receives are counted; 0 when the file does not say (cpu: unchecked;
  // sim: the hardware profile's).
  double memory_gb = 0;
  // The `gpu` key: which GPU of its machine runs the device on the cuda backend (several
  // devices may share one); -1 when the file does not say.
  std::int32_t gpu = -1;

  bool operator==(const DeviceSpec&) const = default;
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

// Device names end up in messages, the console and trace files: non-empty text without
// control characters.
bool valid_device_name(std::string_view name);

// The model facts a layout relies on: a sparse/dense flag per block, no negative counts.
Status check_model_for_layout(const ModelConfig& config);

// Structural checks of a layout however it was made (file, constructor, live edit): device
// names unique and non-empty, at least one attention device, ranks numbered in order,
// holds_experts consistent with the placement, no device without a role, placement complete
// for the model, policy and capacity in range.
Status validate_layout(const Layout& layout, const ModelConfig& config);

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
