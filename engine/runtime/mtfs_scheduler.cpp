#include "engine/runtime/mtfs_scheduler.h"

namespace sy {

std::optional<GridPick> MtfsScheduler::pick(const QueueGrid& grid) {
  std::optional<GridPick> best;
  std::int64_t most = 0;
  grid.for_each_occupied_block([&](std::int32_t b) {  // an empty block cannot beat `most`
    for (std::int32_t e = 0; e < grid.columns(); ++e)
      if (grid.at(b, e) > most && grid.pickable(b, e)) {
        most = grid.at(b, e);
        best = GridPick{b, e};
      }
  });
  return best;
}

}  // namespace sy
