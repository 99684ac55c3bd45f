// Which expert weights each device holds, and what a placement change must copy to get there:
// the memory accounting of placement that moves weights. Pure bookkeeping, tested without a
// backend; the cluster runs the copies it plans.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "engine/runtime/placement.h"

namespace sy {

// One expert's weights on their way to a device.
struct WeightCopy {
  std::int32_t block = 0;
  std::int32_t expert = 0;
  std::int32_t source = -1;  // device copied from; -1: the host's copy
  std::int32_t target = 0;
  std::int64_t bytes = 0;
  std::int64_t started_ns = 0;
};

class ExpertResidency {
 public:
  ExpertResidency() = default;
  // capacity[d]: device d's memory in bytes (0: unknown, never refused); fixed[d]: what it
  // holds besides expert weights (an attention rank's KV storage). devices_per_node: copies
  // prefer a source on the target's node (0: one node).
  ExpertResidency(std::int32_t num_devices, std::int64_t expert_bytes, std::vector<std::int64_t> capacity,
                  std::vector<std::int64_t> fixed, std::int32_t devices_per_node = 0);

  // Resident at once (the start-up placement; a device of another process at a switch).
  void load(std::int32_t block, std::int32_t expert, std::int32_t device);
  void drop(std::int32_t block, std::int32_t expert, std::int32_t device);
  bool resident(std::int32_t block, std::int32_t expert, std::int32_t device) const;
  bool arriving(std::int32_t block, std::int32_t expert, std::int32_t device) const;

  // The copies `target` needs: one per (block, expert, device) it places that is neither
  // resident nor arriving, from a device where it is resident (one on the target's node
  // first, then the lowest index; the host when none). Refused, changing nothing, when a
  // device's memory cannot take them: the message names the device, the bytes the copies need
  // and the bytes free. Sources keep their copies until the switch, so a move needs room on
  // its target first.
  StatusOr<std::vector<WeightCopy>> plan(const Placement& target, const std::vector<std::string>& device_names) const;
  void begin(const WeightCopy& copy);    // the copy is arriving
  void arrived(const WeightCopy& copy);  // and now resident

  // The (block, expert) resident on `device` that neither `keep` nor `also_keep` (may be null)
  // places there: what to free once `keep` has switched in.
  std::vector<BlockExpert> surplus(std::int32_t device, const Placement& keep, const Placement* also_keep) const;

  std::int32_t num_devices() const { return static_cast<std::int32_t>(capacity_.size()); }
  std::int64_t expert_bytes() const { return expert_bytes_; }
  std::int64_t capacity(std::int32_t device) const { return capacity_[static_cast<std::size_t>(device)]; }
  std::int64_t fixed(std::int32_t device) const { return fixed_[static_cast<std::size_t>(device)]; }
  std::int64_t resident_experts(std::int32_t device) const;
  std::int64_t arriving_experts(std::int32_t device) const;
  // Everything counted against the device: fixed + resident + arriving expert weights.
  std::int64_t used_bytes(std::int32_t device) const;
  std::int64_t arriving_total() const { return static_cast<std::int64_t>(arriving_.size()); }
  void set_devices_per_node(std::int32_t n) { devices_per_node_ = n; }

 private:
  using Key = std::tuple<std::int32_t, std::int32_t, std::int32_t>;  // device, block, expert
  std::int64_t expert_bytes_ = 0;
  std::vector<std::int64_t> capacity_, fixed_;
  std::int32_t devices_per_node_ = 0;
  std::set<Key> resident_, arriving_;
};

}  // namespace sy
