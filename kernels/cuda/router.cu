// router_topk_cuda: one warp per token; softmax by warp reductions, then k rounds of a warp
// argmax over the experts not yet taken (experts live in registers, 8 per lane).
#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kPerLane = 8;
constexpr int kMaxExperts = 32 * kPerLane;

// The CPU kernel's selection order: a larger probability first, ties to the lower id, NaN below
// every number, "none yet" (INT_MAX) last. NaN matters: a NaN or infinite logit makes the whole
// softmax row NaN, where the CPU's strict-> scan keeps the first untaken expert each round
// (ids 0, 1, .., k-1); plain > comparisons would leave every lane at INT_MAX, write that as an
// expert id, and shift `taken` by best_e / 32 (undefined) — the runtime would then index an
// expert far out of range.
__device__ __forceinline__ bool ranks_before(float a, int ea, float b, int eb) {
  if (ea == INT_MAX || eb == INT_MAX) return ea < eb;
  const bool a_nan = isnan(a), b_nan = isnan(b);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return a > b;
  return ea < eb;
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    router_kernel(const float* __restrict__ logits, long long n_tokens, int E, int k, bool renormalize,
                  std::int32_t* __restrict__ ids, float* __restrict__ weights) {
  const int lane = threadIdx.x % 32;
  const long long t = static_cast<long long>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (t >= n_tokens) return;  // whole warps leave together, so the shuffles below stay full
  const float* row = logits + t * E;
  float p[kPerLane];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + 32 * i;
    p[i] = e < E ? row[e] : -INFINITY;
    m = fmaxf(m, p[i]);
  }
  m = detail::warp_max(m);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    p[i] = lane + 32 * i < E ? expf(p[i] - m) : 0.0f;
    sum += p[i];
  }
  sum = detail::warp_sum(sum);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) p[i] = lane + 32 * i < E ? p[i] / sum : -1.0f;  // never picked: marked taken below

  unsigned taken = 0;  // bit i: expert lane + 32·i already selected, or no expert (≥ E)
#pragma unroll
  for (int i = 0; i < kPerLane; ++i)
    if (lane + 32 * i >= E) taken |= 1u << i;
  float total = 0.0f;
  std::int32_t* out_ids = ids + t * k;
  float* out_w = weights + t * k;
  for (int r = 0; r < k; ++r) {
    float best = 0.0f;
    int best_e = INT_MAX;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (((taken >> i) & 1u) == 0 && ranks_before(p[i], lane + 32 * i, best, best_e)) {
        best = p[i];
        best_e = lane + 32 * i;
      }
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_e = __shfl_xor_sync(0xffffffffu, best_e, offset);
      if (ranks_before(other, other_e, best, best_e)) {
        best = other;
        best_e = other_e;
      }
    }
    if (lane == best_e % 32) taken |= 1u << (best_e / 32);
    if (lane == 0) {
      out_ids[r] = best_e;
      out_w[r] = best;
    }
    total += best;  // in rank order, like the CPU kernel
  }
  if (renormalize && lane == 0)
    for (int r = 0; r < k; ++r) out_w[r] /= total;
}

}  // namespace

Status router_topk_cuda(const float* logits, std::int64_t n_tokens, std::int32_t n_experts, std::int32_t k,
                      bool renormalize, std::int32_t* expert_ids, float* weights, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n_experts >= 1 && n_experts <= kMaxExperts, "router_topk_cuda: n_experts must be 1..256"));
  SY_RETURN_IF_ERROR(detail::require(k >= 1 && k <= n_experts, "router_topk_cuda: k must be 1..n_experts"));
  // One warp per token and no grid-stride loop: every token needs a block within gridDim.x's
  // limit of 2^31 - 1 (a grid of 2^31 blocks is itself an invalid launch).
  constexpr long long kMaxBlocks = 0x7fffffffLL;
  SY_RETURN_IF_ERROR(detail::require(n_tokens >= 0 && n_tokens <= kMaxBlocks * kWarpsPerBlock,
                                     "router_topk_cuda: token count must be 0..(2^31 - 1) * 4"));
  if (n_tokens == 0) return Status::Ok();
  const unsigned blocks = detail::grid_for(n_tokens, kWarpsPerBlock, kMaxBlocks);
  router_kernel<<<blocks, kWarpsPerBlock * 32, 0, stream>>>(logits, n_tokens, n_experts, k, renormalize, expert_ids,
                                                            weights);
  SY_RETURN_IF_ERROR(detail::check_launch("router_topk_cuda"));
  return Status::Ok();
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_router_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(router_kernel)});
}

}  // namespace sy::kernels
