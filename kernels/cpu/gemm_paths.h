// The implementations behind linear() (internal to kernels/cpu): gemm.cpp picks one per call.
#pragma once

#include <cstdint>

#include "kernels/cpu/weight_view.h"

namespace sy::kernels::detail {

// y = (accumulate ? y : 0) + bias + x·Wᵀ, the contract of linear(), for every path below.
struct LinearArgs {
  const float* x;
  std::int64_t M;
  const WeightView* w;
  const float* bias;
  float* y;
  bool accumulate;
};

// Largest M the fused dot-product kernel takes (its tiles hold this many activation rows).
constexpr std::int64_t kFusedMaxRows = 8;

// Small M (decode): dot products that read W in its own dtype, streaming it exactly once.
// Requires AVX2 and M ≤ kFusedMaxRows.
void linear_fused(const LinearArgs& a);

// Any M, 16-bit W: a register-blocked GEMM whose packing step widens W to float32 on the fly,
// so no float32 copy of W is ever materialised. Requires AVX2 and a bf16/f16 W.
void linear_packed(const LinearArgs& a);

// Writes bias into y (adds it when accumulating) and returns the beta with which a GEMM must
// then add x·Wᵀ: 1 when y now holds something to keep, else 0.
float prepare_output(float* y, std::int64_t M, std::int64_t N, const float* bias, bool accumulate);

}  // namespace sy::kernels::detail
