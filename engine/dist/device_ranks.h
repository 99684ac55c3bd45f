// Which rank (process) runs each device of a layout: the devices' `rank` keys, or an even split
// of the devices in file order over the ranks when no device has one.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/runtime/layout.h"

namespace sy::dist {

// Errors name the device and the problem: a rank beyond the world, `rank` on some devices but
// not all, more ranks than devices (even split), or an attention device outside rank 0 (the
// coordinator and the KV block managers live there; attention on other ranks is not supported
// yet).
StatusOr<std::vector<std::int32_t>> assign_device_ranks(const Layout& layout, std::int32_t world);

}  // namespace sy::dist
