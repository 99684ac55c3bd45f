#include "engine/dist/device_ranks.h"

namespace sy::dist {

StatusOr<std::vector<std::int32_t>> assign_device_ranks(const Layout& layout, std::int32_t world) {
  const std::int32_t n = layout.num_devices();
  std::vector<std::int32_t> ranks(static_cast<std::size_t>(n), 0);
  std::int32_t with_rank = 0;
  for (const DeviceSpec& d : layout.devices) with_rank += d.process >= 0 ? 1 : 0;
  if (with_rank > 0 && with_rank < n) {
    for (const DeviceSpec& d : layout.devices)
      if (d.process < 0)
        return Status::Error("layout '" + layout.name + "': device '" + d.name +
                             "' has no rank while others do (give every device a rank, or none for an even split)");
  }
  if (with_rank == n) {
    for (std::int32_t i = 0; i < n; ++i) {
      const DeviceSpec& d = layout.devices[static_cast<std::size_t>(i)];
      if (d.process >= world)
        return Status::Error("layout '" + layout.name + "': device '" + d.name + "' is on rank " +
                             std::to_string(d.process) + ", but the launcher started " + std::to_string(world) +
                             " rank(s) (0-" + std::to_string(world - 1) + ")");
      ranks[static_cast<std::size_t>(i)] = d.process;
    }
  } else {
    if (world > n)
      return Status::Error("layout '" + layout.name + "' has " + std::to_string(n) + " device(s), fewer than the " +
                           std::to_string(world) + " ranks started: start at most " + std::to_string(n) +
                           " or give devices a rank");
    for (std::int32_t i = 0; i < n; ++i)
      ranks[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(static_cast<std::int64_t>(i) * world / n);
  }
  return ranks;
}

}  // namespace sy::dist
