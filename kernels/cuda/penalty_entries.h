// The host side of penalize_cuda: a batch's logit biases and penalty terms as PenaltyEntry rows.
// (C++20 for std::span; the .cu files, compiled as C++17, do not include it.)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/sampling.h"
#include "kernels/cuda/cuda_kernels.h"

namespace sy::kernels {

// Appends row `row`'s entries: one per token of `terms` (penalty_terms, in token order) or of
// `biases`, the two merged, tokens outside [0, vocab) left out as the cpu skips them.
void append_penalty_entries(std::vector<PenaltyEntry>& out, std::int32_t row, std::int32_t vocab,
                            std::span<const PenaltyTerm> terms, std::span<const TokenBias> biases, const Penalties& p);

}  // namespace sy::kernels
