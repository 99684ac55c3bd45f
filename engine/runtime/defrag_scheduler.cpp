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
  occupied_.clear();
  density_.resize(static_cast<std::size_t>(nb));
  grid.for_each_occupied_block([&](std::int32_t b) {
    occupied_.push_back(b);
    density_[static_cast<std::size_t>(b)] = static_cast<double>(grid.block_tokens(b)) / std::max(1, grid.block_width(b));
  });
  std::optional<GridPick> best;
  double best_score = 0;
  for (std::int32_t b : occupied_) {  // ascending: ties go to the lowest (block, expert)
    double lscore = 0;
    std::int32_t ahead = b;
    for (std::int32_t k = 1; k <= lookahead_; ++k) {
      if (++ahead == nb) ahead = 0;  // the sampler's block wraps to block 0 (the next token)
      if (grid.block_tokens(ahead) != 0)
        lscore += density_[static_cast<std::size_t>(ahead)] * weights_[static_cast<std::size_t>(k - 1)];
    }
    for (std::int32_t e = 0; e < ne; ++e) {
      const std::int64_t q = grid.at(b, e);
      if (q <= 0 || !grid.pickable(b, e)) continue;
      const double score = lscore + static_cast<double>(q);
      if (!best || score > best_score) {  // strict: ties go to the lowest (block, expert)
        best = GridPick{b, e};
        best_score = score;
      }
    }
  }
  return best;
}

}  // namespace sy
