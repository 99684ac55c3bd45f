#include "engine/runtime/tail_scheduler.h"

namespace sy {

std::optional<GridPick> TailScheduler::pick(const QueueGrid& grid) {
  const std::int32_t nb = grid.blocks(), ne = grid.columns();
  occupied_.clear();
  grid.for_each_occupied_block([&](std::int32_t b) {
    for (std::int32_t e = 0; e < ne; ++e)
      if (grid.pickable(b, e)) {
        occupied_.push_back(b);
        return;
      }
  });
  if (occupied_.empty()) return std::nullopt;
  // The gap before occupied_[i] is the empty blocks between it and the previous occupied block
  // around the ring; the widest gap's end is the tail (ties: the lowest block).
  std::size_t tail = 0;
  std::int32_t widest = -1;
  for (std::size_t i = 0; i < occupied_.size(); ++i) {
    const std::int32_t prev = i == 0 ? occupied_.back() - nb : occupied_[i - 1];
    const std::int32_t gap = occupied_[i] - prev - 1;
    if (gap > widest) {
      widest = gap;
      tail = i;
    }
  }
  const std::int32_t b = occupied_[tail];
  std::optional<GridPick> best;
  std::int64_t most = 0;
  for (std::int32_t e = 0; e < ne; ++e)
    if (grid.pickable(b, e) && grid.at(b, e) > most) {
      most = grid.at(b, e);
      best = GridPick{b, e};
    }
  return best;
}

}  // namespace sy
