#include "engine/runtime/expert_residency.h"

#include <cassert>
#include <map>
#include <algorithm>
#include <iterator>

namespace sy {

ExpertResidency::ExpertResidency(std::int32_t num_devices, std::int64_t expert_bytes, std::vector<std::int64_t> capacity,
                                 std::vector<std::int64_t> fixed, std::int32_t devices_per_node)
    : expert_bytes_(expert_bytes),
      capacity_(std::move(capacity)),
      fixed_(std::move(fixed)),
      devices_per_node_(devices_per_node) {
  capacity_.resize(static_cast<std::size_t>(num_devices), 0);
  fixed_.resize(static_cast<std::size_t>(num_devices), 0);
}

void ExpertResidency::load(std::int32_t block, std::int32_t expert, std::int32_t device) {
  arriving_.erase({device, block, expert});
  resident_.insert({device, block, expert});
}

void ExpertResidency::drop(std::int32_t block, std::int32_t expert, std::int32_t device) {
  resident_.erase({device, block, expert});
}

bool ExpertResidency::resident(std::int32_t block, std::int32_t expert, std::int32_t device) const {
  return resident_.contains({device, block, expert});
}

bool ExpertResidency::arriving(std::int32_t block, std::int32_t expert, std::int32_t device) const {
  return arriving_.contains({device, block, expert});
}

std::int64_t ExpertResidency::resident_experts(std::int32_t device) const {
  const auto lo = resident_.lower_bound({device, INT32_MIN, INT32_MIN});
  const auto hi = resident_.lower_bound({device + 1, INT32_MIN, INT32_MIN});
  return static_cast<std::int64_t>(std::distance(lo, hi));
}

std::int64_t ExpertResidency::arriving_experts(std::int32_t device) const {
  const auto lo = arriving_.lower_bound({device, INT32_MIN, INT32_MIN});
  const auto hi = arriving_.lower_bound({device + 1, INT32_MIN, INT32_MIN});
  return static_cast<std::int64_t>(std::distance(lo, hi));
}

std::int64_t ExpertResidency::used_bytes(std::int32_t device) const {
  return fixed(device) + (resident_experts(device) + arriving_experts(device)) * expert_bytes_;
}

StatusOr<std::vector<WeightCopy>> ExpertResidency::plan(const Placement& target,
                                                        const std::vector<std::string>& device_names) const {
  std::vector<WeightCopy> copies;
  std::map<std::int32_t, std::int64_t> incoming;  // device -> experts to copy there
  const auto node = [&](std::int32_t d) { return devices_per_node_ > 0 ? d / devices_per_node_ : 0; };
  for (std::int32_t b = 0; b < target.num_blocks(); ++b) {
    if (!target.is_sparse(b)) continue;
    for (std::int32_t e = 0; e < target.num_experts(); ++e) {
      for (std::int32_t d : target.devices(b, e)) {
        if (resident(b, e, d) || arriving(b, e, d)) continue;
        WeightCopy c{b, e, -1, d, expert_bytes_, 0};
        for (std::int32_t s = 0; s < num_devices(); ++s) {
          if (!resident(b, e, s)) continue;
          if (c.source < 0 || (node(s) == node(d) && node(c.source) != node(d))) c.source = s;
        }
        copies.push_back(c);
        ++incoming[d];
      }
    }
  }
  for (const auto& [d, n] : incoming) {
    const std::int64_t cap = capacity(d);
    const std::int64_t need = n * expert_bytes_;
    const std::int64_t used = used_bytes(d);
    if (cap <= 0 || used + need <= cap) continue;
    const std::string name = d < static_cast<std::int32_t>(device_names.size()) ? " (" + device_names[d] + ")" : "";
    return Status::Error("device " + std::to_string(d) + name + " has no room for the weights: " + std::to_string(n) +
                         (n == 1 ? " expert needs " : " experts need ") + std::to_string(need) + " bytes, " +
                         std::to_string(std::max<std::int64_t>(0, cap - used)) + " of its " + std::to_string(cap) +
                         " bytes are free");
  }
  return copies;
}

void ExpertResidency::begin(const WeightCopy& copy) {
  assert(!resident(copy.block, copy.expert, copy.target));
  arriving_.insert({copy.target, copy.block, copy.expert});
}

void ExpertResidency::arrived(const WeightCopy& copy) { load(copy.block, copy.expert, copy.target); }

std::vector<BlockExpert> ExpertResidency::surplus(std::int32_t device, const Placement& keep,
                                                  const Placement* also_keep) const {
  std::vector<BlockExpert> out;
  const auto lo = resident_.lower_bound({device, INT32_MIN, INT32_MIN});
  const auto hi = resident_.lower_bound({device + 1, INT32_MIN, INT32_MIN});
  for (auto it = lo; it != hi; ++it) {
    const auto [d, b, e] = *it;
    if (keep.holds(b, e, d) || (also_keep && also_keep->holds(b, e, d))) continue;
    out.push_back({b, e});
  }
  return out;
}

}  // namespace sy
