#include "engine/runtime/defrag_scheduler.h"

#include <algorithm>

namespace sy {

DefragScheduler::DefragScheduler(std::int32_t lookahead, double decay) : lookahead_(lookahead), decay_(decay) {
  double weight = 1;
  for (std::int32_t k = 1; k <= lookahead_; ++k) weights_.push_back(weight *= decay_);
}

std::optional<GridPick> DefragScheduler::pick(const QueueGrid& grid) {
  const std::int32_t nb = grid.blocks(), ne = grid.columns();
  if (nb == 0 || ne == 0) return std::nullopt;
  // Algorithm 1 recomputes TotalTokens/N_E for every (b, k); the per-block density is the same
  // each time, and the grid keeps each block's total: O(NB + NB·K) instead of O(NB·K·NE). Only
  // blocks with a waiting token can be picked, so the lookahead is summed for those alone.
  density_.resize(static_cast<std::size_t>(nb));
  double* density = density_.data();
  grid.for_each_occupied_block([&](std::int32_t b) {
    density[b] = static_cast<double>(grid.block_tokens(b)) / std::max(1, grid.block_width(b));
  });
  const double* weights = weights_.data();
  const std::int64_t* cells = grid.cells();
  const std::uint8_t* held = grid.held_cells();
  std::int32_t best_block = -1, best_column = 0;
  double best_score = 0;
  grid.for_each_occupied_block([&](std::int32_t b) {  // ascending: ties go to the lowest (block, expert)
    double lscore = 0;
    std::int32_t ahead = b;
    for (std::int32_t k = 0; k < lookahead_; ++k) {
      if (++ahead == nb) ahead = 0;  // the sampler's block wraps to block 0 (the next token)
      if (grid.block_tokens(ahead) != 0) lscore += density[ahead] * weights[k];
    }
    const std::size_t row = static_cast<std::size_t>(b) * static_cast<std::size_t>(ne);
    for (std::int32_t e = 0; e < ne; ++e) {
      const std::int64_t q = cells[row + static_cast<std::size_t>(e)];
      if (q <= 0 || (held && held[row + static_cast<std::size_t>(e)] != 0)) continue;
      const double score = lscore + static_cast<double>(q);
      if (best_block < 0 || score > best_score) {  // strict: ties go to the lowest (block, expert)
        best_block = b;
        best_column = e;
        best_score = score;
      }
    }
  });
  if (best_block < 0) return std::nullopt;
  return GridPick{best_block, best_column};
}

}  // namespace sy
