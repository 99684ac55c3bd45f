#include "engine/dist/device_link_plan.h"

namespace sy::dist {

bool device_linked(const std::vector<std::string>& memories, std::int32_t from, std::int32_t to) {
  const auto n = static_cast<std::int32_t>(memories.size());
  if (from < 0 || to < 0 || from >= n || to >= n || from == to) return false;
  const std::string& a = memories[static_cast<std::size_t>(from)];
  const std::string& b = memories[static_cast<std::size_t>(to)];
  return !a.empty() && !b.empty() && a != b;
}

std::vector<DeviceLinkPair> device_link_pairs(const std::vector<std::string>& memories) {
  std::vector<DeviceLinkPair> pairs;
  const auto n = static_cast<std::int32_t>(memories.size());
  for (std::int32_t from = 0; from < n; ++from)
    for (std::int32_t to = 0; to < n; ++to)
      if (device_linked(memories, from, to)) pairs.push_back({from, to});
  return pairs;
}

}  // namespace sy::dist
