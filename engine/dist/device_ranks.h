// Which rank (process) runs each device of a layout: the devices' `rank` keys, or an even split
// of the devices in file order over the ranks when no device has one.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/runtime/layout.h"

namespace sy::dist {

// Errors name the device and the problem: a rank beyond the world, `rank` on some devices but
// not all, more ranks than devices (even split). Attention devices may run on any rank: rank 0
// keeps the coordinator and allocates their KV pages, their own rank mirrors the block tables.
StatusOr<std::vector<std::int32_t>> assign_device_ranks(const Layout& layout, std::int32_t world);

}  // namespace sy::dist
