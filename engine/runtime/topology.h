// Who runs what: attention ranks and expert placement resolved to device indices, in the form
// the workers' hot paths look things up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/model_config.h"
#include "engine/runtime/layout.h"
#include "engine/runtime/placement.h"

namespace sy {

struct Topology {
  std::int32_t num_devices = 0;
  std::int32_t num_blocks = 0;
  std::int32_t num_experts = 0;
  std::int32_t top_k = 0;
  std::int32_t vocab_size = 0;  // token ids of block 0's rows lie below it (0: not checked)
  std::int32_t hidden_size = 0;  // the width of rows' activations (0: not checked)
  std::vector<std::string> device_names;
  std::vector<bool> sparse;                    // [block]: routed experts or dense MLP
  std::vector<std::int32_t> rank_device;       // attention rank -> device
  std::vector<std::int32_t> device_rank;       // device -> attention rank, or -1
  Placement placement;                         // which devices hold each routed expert (replicas)
  // device -> the process (launcher rank) that runs its worker; empty or all 0 in one process.
  std::vector<std::int32_t> device_process;
  // device -> its memory in bytes, against which expert weights are counted (0 or absent:
  // unknown, nothing refused). From the layout's memory_gb, else the sim's hardware profile.
  std::vector<std::int64_t> device_memory_bytes;
  // device -> the GPU its worker runs on (cuda backend; the layout's `gpu` keys), -1 where unset.
  std::vector<std::int32_t> device_gpu;
  // Derived by finalize():
  std::vector<std::vector<std::int32_t>> block_expert_devices;  // [block] -> devices holding any of its experts
  std::vector<std::vector<std::int32_t>> device_expert_ids;     // [device] -> distinct expert ids it holds

  std::int32_t num_ranks() const { return static_cast<std::int32_t>(rank_device.size()); }
  std::int32_t process_of(std::int32_t device) const {
    return device_process.empty() ? 0 : device_process[static_cast<std::size_t>(device)];
  }
  // Recomputes the derived tables after rank_device / placement changed.
  void finalize();

  // The devices, ranks and placement of a validated layout.
  static Topology from_layout(const Layout& layout, const ModelConfig& config);
  // Colocated: every device is an attention rank and holds a round-robin share of experts.
  static Topology colocated(const ModelConfig& config, std::int32_t devices);
  // Disaggregated: `attention` attention-only devices, then `experts` expert-only devices.
  static Topology disaggregated(const ModelConfig& config, std::int32_t attention, std::int32_t experts);
};

}  // namespace sy
