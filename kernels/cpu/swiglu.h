// SwiGLU feed-forward (the expert MLP of Mixtral and Qwen MoE models).
#pragma once

#include <cstdint>

#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/weight_view.h"

namespace sy::kernels {

// h[i] = silu(g[i]) · u[i], silu(x) = x · sigmoid(x).
void silu_mul(const float* g, const float* u, float* h, std::int64_t n);

// Workspace for swiglu_ffn, grown on demand so steady-state calls do not allocate.
struct SwigluScratch {
  float* gate = nullptr;
  float* up = nullptr;
  std::int64_t capacity = 0;  // elements in each buffer
  std::vector<float> rounded;  // x rounded to the weight type (GemmInputs::WeightType)
  SwigluScratch() = default;
  // Owns its buffers: copying would double-free them, moving hands them over.
  SwigluScratch(const SwigluScratch&) = delete;
  SwigluScratch& operator=(const SwigluScratch&) = delete;
  SwigluScratch(SwigluScratch&& other) noexcept;
  SwigluScratch& operator=(SwigluScratch&& other) noexcept;
  ~SwigluScratch();
  void reserve(std::int64_t elements);
};

// y[M, H] = down( silu(x·gateᵀ) ⊙ (x·upᵀ) ). gate and up are [I, H], down is [H, I]
// (Mixtral's w1, w3, w2). If row_scale is non-null, row m of the result is multiplied by
// row_scale[m] (the router weight); with accumulate the result is added to y. Under
// GemmInputs::WeightType, x and h are rounded to the weights' type before their GEMMs.
void swiglu_ffn(const float* x, std::int64_t M, const WeightView& gate, const WeightView& up,
                const WeightView& down, float* y, SwigluScratch& scratch,
                const float* row_scale = nullptr, bool accumulate = false,
                GemmInputs inputs = GemmInputs::Float32);

}  // namespace sy::kernels
