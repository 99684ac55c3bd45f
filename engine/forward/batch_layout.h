// How the tokens of one forward batch map onto sequences, positions and KV block tables.
#pragma once

#include <cstdint>
#include <vector>

namespace sy {

// Tokens of one sequence are contiguous in the batch. Sequences in different phases mix
// freely: a prefill chunk and many one-token decodes run through the same layers together.
struct BatchLayout {
  struct Sequence {
    std::int32_t first_token = 0;  // row of its first token in the batch
    std::int32_t n_tokens = 0;
    std::int32_t start_pos = 0;    // absolute position of its first token
    const std::int32_t* block_table = nullptr;
  };
  std::vector<Sequence> sequences;
  std::vector<std::int32_t> positions;  // absolute position of every batch row

  std::int64_t n_tokens() const { return static_cast<std::int64_t>(positions.size()); }

  void add_sequence(std::int32_t n_tokens, std::int32_t start_pos, const std::int32_t* block_table) {
    sequences.push_back({static_cast<std::int32_t>(positions.size()), n_tokens, start_pos, block_table});
    for (std::int32_t i = 0; i < n_tokens; ++i) positions.push_back(start_pos + i);
  }
  void clear() {
    sequences.clear();
    positions.clear();
  }
};

}  // namespace sy
