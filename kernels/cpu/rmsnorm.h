// RMSNorm as in Hugging Face (LlamaRMSNorm / Qwen*RMSNorm): y = w · x / sqrt(mean(x²) + eps).
#pragma once

#include <cstdint>

#include "kernels/cpu/dtype.h"

namespace sy::kernels {

// Normalises `rows` rows of `dim` elements each. `weight` is [dim] in `weight_type`. x and y
// may alias (in-place). Qwen3's per-head q/k norm is this with rows = tokens·heads, dim = head_dim.
void rmsnorm(const float* x, const void* weight, DType weight_type, float eps, std::int64_t rows,
             std::int64_t dim, float* y);

}  // namespace sy::kernels
