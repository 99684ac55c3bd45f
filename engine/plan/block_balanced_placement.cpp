#include "engine/plan/block_balanced_placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace sy {

StatusOr<Placement> block_balanced_placement(const std::vector<std::vector<double>>& load,
                                             const std::vector<std::int32_t>& devices, std::int32_t num_experts) {
  if (devices.empty()) return Status::Error("block-balanced placement: no expert devices to place experts on");
  if (num_experts < 1) return Status::Error("block-balanced placement: no experts to place");
  std::vector<bool> sparse(load.size());
  for (std::size_t b = 0; b < load.size(); ++b) {
    sparse[b] = !load[b].empty();
    if (sparse[b] && load[b].size() != static_cast<std::size_t>(num_experts))
      return Status::Error("block-balanced placement: block " + std::to_string(b) + " has " +
                           std::to_string(load[b].size()) + " expert loads, expected " + std::to_string(num_experts));
    for (double l : load[b])
      if (!std::isfinite(l) || l < 0)
        return Status::Error("block-balanced placement: block " + std::to_string(b) + " has a load of " +
                             std::to_string(l) + " (expected a finite load >= 0)");
  }
  const auto n_dev = devices.size();
  const auto slots = (static_cast<std::size_t>(num_experts) + n_dev - 1) / n_dev;
  Placement placement(static_cast<std::int32_t>(load.size()), num_experts, sparse);
  std::vector<double> total(n_dev, 0.0);  // [device index] load over the blocks placed so far
  std::vector<std::int32_t> by_load(static_cast<std::size_t>(num_experts));
  for (std::size_t b = 0; b < load.size(); ++b) {
    if (!sparse[b]) continue;
    const auto& l = load[b];
    std::iota(by_load.begin(), by_load.end(), 0);
    std::stable_sort(by_load.begin(), by_load.end(),
                     [&](std::int32_t x, std::int32_t y) { return l[static_cast<std::size_t>(x)] > l[static_cast<std::size_t>(y)]; });
    // LPT with a slot bound: the heaviest remaining expert joins the lightest group with room.
    std::vector<std::vector<std::int32_t>> group(n_dev);
    std::vector<double> group_load(n_dev, 0.0);
    for (std::int32_t e : by_load) {
      std::size_t best = n_dev;
      for (std::size_t g = 0; g < n_dev; ++g)
        if (group[g].size() < slots && (best == n_dev || group_load[g] < group_load[best])) best = g;
      group[best].push_back(e);
      group_load[best] += l[static_cast<std::size_t>(e)];
    }
    // Heaviest group to the device with the least load so far (ties: the lower device).
    std::vector<std::size_t> groups(n_dev), devs(n_dev);
    std::iota(groups.begin(), groups.end(), 0);
    std::iota(devs.begin(), devs.end(), 0);
    std::stable_sort(groups.begin(), groups.end(), [&](std::size_t x, std::size_t y) { return group_load[x] > group_load[y]; });
    std::stable_sort(devs.begin(), devs.end(), [&](std::size_t x, std::size_t y) { return total[x] < total[y]; });
    for (std::size_t i = 0; i < n_dev; ++i) {
      const std::size_t g = groups[i], d = devs[i];
      total[d] += group_load[g];
      for (std::int32_t e : group[g]) {
        Status s = placement.set(static_cast<std::int32_t>(b), e, {devices[d]});
        if (!s.ok()) return s;
      }
    }
  }
  return placement;
}

}  // namespace sy
