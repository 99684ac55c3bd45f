#include "engine/runtime/flfs_scheduler.h"

namespace sy {

std::optional<GridPick> FlfsScheduler::pick(const QueueGrid& grid) {
  for (std::int32_t b = 0; b < grid.blocks(); ++b) {
    if (grid.block_tokens(b) == 0) continue;
    std::optional<GridPick> best;
    std::int64_t most = 0;
    for (std::int32_t e = 0; e < grid.columns(); ++e)
      if (grid.at(b, e) > most && grid.pickable(b, e)) {
        most = grid.at(b, e);
        best = GridPick{b, e};
      }
    if (best) return best;
  }
  return std::nullopt;
}

}  // namespace sy
