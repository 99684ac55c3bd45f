// A worker's scheduling decision as a pure object: given the tokens waiting in each drainable
// μ-queue, which layer runs next. No backend, clock or queue types: tested on plain grids.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace sy {

// Tokens of a device's drainable μ-queues laid out blocks × columns (a column is an expert or
// an attention rank hosted by the device; the sampler is the extra last block). Zero means
// nothing runnable there.
// The grid keeps each block's total beside the cells, updated with them, so a scheduler finds
// the occupied blocks without summing every cell on every pick.
class QueueGrid {
 public:
  QueueGrid() = default;
  // A grid holding `tokens` ([block * columns + column]), for tests and benchmarks.
  static QueueGrid from(std::int32_t blocks, std::int32_t columns, std::vector<std::int64_t> tokens);

  void reset(std::int32_t b, std::int32_t c) {
    blocks_ = b;
    columns_ = c;
    tokens_.assign(static_cast<std::size_t>(b) * static_cast<std::size_t>(c), 0);
    block_tokens_.assign(static_cast<std::size_t>(b), 0);
    occupied_.assign((static_cast<std::size_t>(b) + 63) / 64, 0);
    block_width_.clear();
    held_.clear();
  }
  // How many of the columns are the block's own: the experts (and attention rank) the device
  // hosts in that block. The columns are the union over all blocks, so a placement that differs
  // from block to block leaves each block fewer than all of them; the defrag lookahead divides a
  // block's tokens by its own count (Algorithm 1's N_E). Every column until set.
  void set_block_width(std::int32_t b, std::int32_t width) {
    if (block_width_.empty()) block_width_.assign(static_cast<std::size_t>(blocks_), columns_);
    block_width_[static_cast<std::size_t>(b)] = width;
  }
  std::int32_t block_width(std::int32_t b) const {
    return block_width_.empty() ? columns_ : block_width_[static_cast<std::size_t>(b)];
  }
  std::int32_t blocks() const { return blocks_; }
  std::int32_t columns() const { return columns_; }
  std::int64_t at(std::int32_t b, std::int32_t c) const { return tokens_[static_cast<std::size_t>(b * columns_ + c)]; }
  // Σ over the block's columns.
  std::int64_t block_tokens(std::int32_t b) const { return block_tokens_[static_cast<std::size_t>(b)]; }
  // Cell `index` (block * columns + column) now holds `tokens`.
  void set(std::size_t index, std::int64_t tokens) { set(index, index / static_cast<std::size_t>(columns_), tokens); }
  // The same where the caller knows the cell's block (b = index / columns): a worker sets a
  // cell at every arrival and every take, and the division cost more cycles than the rest.
  void set(std::size_t index, std::size_t b, std::int64_t tokens) {
    std::int64_t& cell = tokens_[index];
    std::int64_t& total = block_tokens_[b];
    total += tokens - cell;
    cell = tokens;
    const std::uint64_t bit = std::uint64_t{1} << (b % 64);
    std::uint64_t& word = occupied_[b / 64];
    word = total != 0 ? word | bit : word & ~bit;
  }
  // Calls f(block) for every block with a token, ascending: a scheduler's pick visits the few
  // occupied blocks without reading every block's total (a 94-layer model has 95 blocks).
  template <class F>
  void for_each_occupied_block(F&& f) const {
    for (std::size_t w = 0; w < occupied_.size(); ++w)
      for (std::uint64_t bits = occupied_[w]; bits != 0; bits &= bits - 1)
        f(static_cast<std::int32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits))));
  }
  // Bits 64·i … 64·i + 63 of the occupied-block set (bit b: block b has a token).
  std::uint64_t occupied_word(std::size_t i) const { return i < occupied_.size() ? occupied_[i] : 0; }
  void set(std::int32_t b, std::int32_t c, std::int64_t tokens) { set(static_cast<std::size_t>(b * columns_ + c), tokens); }
  // A held cell keeps its tokens (they still count in its block's density, which the defrag
  // lookahead reads) but may not be picked: the μ-queue gate holds it back.
  void hold(std::int32_t b, std::int32_t c) {
    if (held_.empty()) held_.assign(tokens_.size(), 0);
    held_[static_cast<std::size_t>(b * columns_ + c)] = 1;
  }
  bool pickable(std::int32_t b, std::int32_t c) const {
    return at(b, c) > 0 && (held_.empty() || held_[static_cast<std::size_t>(b * columns_ + c)] == 0);
  }
  // The cells and the held flags ([block * columns + column]; nullptr: none held), for a pick
  // that reads a block's row without a bounds computation per cell.
  const std::int64_t* cells() const { return tokens_.data(); }
  const std::uint8_t* held_cells() const { return held_.empty() ? nullptr : held_.data(); }

 private:
  std::int32_t blocks_ = 0;
  std::int32_t columns_ = 0;
  std::vector<std::int64_t> tokens_;        // [block * columns + column]
  std::vector<std::int64_t> block_tokens_;  // [block]
  std::vector<std::uint64_t> occupied_;     // bit b: block_tokens_[b] != 0
  std::vector<std::int32_t> block_width_;   // [block], or empty: every block has every column
  std::vector<std::uint8_t> held_;          // [block * columns + column], or empty: none held
};

struct GridPick {
  std::int32_t block = 0;
  std::int32_t column = 0;
  bool operator==(const GridPick&) const = default;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // The queue to drain next, or nothing when every queue is empty.
  virtual std::optional<GridPick> pick(const QueueGrid& grid) = 0;
  virtual std::string name() const = 0;
};

struct SchedulerParams {
  std::string name = "defrag";  // defrag | mtfs | flfs | tail
  std::int32_t lookahead = 3;   // defrag: blocks looked ahead (K in AMoE Algorithm 1)
  double decay = 1.0;           // defrag: weight δ^k of the k-th block ahead (see layouts/README.md)
};

// Errors name the unknown scheduler or the parameter out of range.
StatusOr<std::unique_ptr<Scheduler>> make_scheduler(const SchedulerParams& params);

}  // namespace sy
