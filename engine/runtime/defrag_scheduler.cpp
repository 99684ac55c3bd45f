#include "engine/runtime/defrag_scheduler.h"

#include <algorithm>
#include <bit>

namespace sy {

DefragScheduler::DefragScheduler(std::int32_t lookahead, double decay) : lookahead_(lookahead), decay_(decay) {
  double weight = 1;
  for (std::int32_t k = 1; k <= lookahead_; ++k) weights_.push_back(weight *= decay_);
}

std::optional<GridPick> DefragScheduler::pick(const QueueGrid& grid) {
  const std::int32_t nb = grid.blocks(), ne = grid.columns();
  if (nb == 0 || ne == 0) return std::nullopt;
  // Algorithm 1 sums TotalTokens/N_E of the K blocks after each block. Only blocks with a
  // waiting token can be picked, so the lookahead is summed for those alone, and an empty
  // block ahead adds nothing (its density is 0), so only the occupied ones ahead are visited;
  // the grid keeps each block's total, so a density is one division. The sums run in k order,
  // so every score is the same double as Algorithm 1's.
  const auto density = [&](std::int32_t b) {
    return static_cast<double>(grid.block_tokens(b)) / std::max(1, grid.block_width(b));
  };
  const double* weights = weights_.data();
  const std::int64_t* cells = grid.cells();
  const std::uint8_t* held = grid.held_cells();
  // Up to 64 blocks (every model but the deepest) the occupied blocks are one word: the blocks
  // ahead of b are a few bits of it, rotated around the ring of nb blocks.
  const bool one_word = nb <= 64 && lookahead_ < 64;
  const std::uint64_t word = one_word ? grid.occupied_word(0) : 0;
  std::int32_t best_block = -1, best_column = 0;
  double best_score = 0;
  grid.for_each_occupied_block([&](std::int32_t b) {  // ascending: ties go to the lowest (block, expert)
    double lscore = 0;
    if (one_word) {
      // Bit k: block (b + 1 + k) mod nb, for k < K (K may exceed nb: the ring repeats).
      for (std::int32_t k = 0; k < lookahead_;) {
        std::int32_t start = b + 1 + k;
        if (start >= nb) start %= nb;  // a division only where the lookahead wraps
        std::uint64_t ahead = word >> start;
        // The bits from `start` up to the ring's end, at most K − k of them.
        const std::int32_t run = std::min(nb - start, lookahead_ - k);
        if (run < 64) ahead &= (std::uint64_t{1} << run) - 1;
        for (; ahead != 0; ahead &= ahead - 1) {
          const auto j = static_cast<std::int32_t>(std::countr_zero(ahead));
          lscore += density(start + j) * weights[k + j];
        }
        k += run;
      }
    } else {
      std::int32_t ahead = b;
      for (std::int32_t k = 0; k < lookahead_; ++k) {
        if (++ahead == nb) ahead = 0;  // the sampler's block wraps to block 0 (the next token)
        if (grid.block_tokens(ahead) != 0) lscore += density(ahead) * weights[k];
      }
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
