// A placement for asynchronous expert parallelism under skewed routing: every block's experts
// split over the expert devices so that each block's load is as even as the split allows, and
// the blocks' groups dealt so that each device's total over all blocks stays even too.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/runtime/placement.h"

namespace sy {

// `load` is [block][expert] expected tokens (e.g. the router's popularity, or a run's expert
// load); a block with an empty row is dense and gets no experts. One copy of every expert,
// ceil(experts / devices) slots per device and block. Per block, experts from the heaviest
// down each join the lightest group with a free slot (LPT), which pairs the hottest expert
// with the coldest; then the block's groups, heaviest first, go to the devices that have the
// least load so far over the earlier blocks. Errors name the empty device list, a row of the
// wrong length, or a negative or non-finite load.
StatusOr<Placement> block_balanced_placement(const std::vector<std::vector<double>>& load,
                                             const std::vector<std::int32_t>& devices, std::int32_t num_experts);

}  // namespace sy
