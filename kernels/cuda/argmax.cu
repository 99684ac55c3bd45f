// argmax_cuda: one block per row; (value, index) pairs reduced with torch.argmax's order:
// NaN above everything, then larger value, then lower index.
#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ bool ranks_before(float a, int ia, float b, int ib) {
  const bool a_nan = isnan(a), b_nan = isnan(b);
  if (a_nan != b_nan) return a_nan;
  if (a_nan || a == b) return ia < ib;
  return a > b;
}

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* __restrict__ logits, int vocab,
                                                          std::int32_t* __restrict__ out) {
  const float* row = logits + static_cast<long long>(blockIdx.x) * vocab;
  float best = -INFINITY;
  int best_i = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (ranks_before(row[i], i, best, best_i)) {
      best = row[i];
      best_i = i;
    }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, best, offset);
    const int other_i = __shfl_xor_sync(0xffffffffu, best_i, offset);
    if (ranks_before(other, other_i, best, best_i)) {
      best = other;
      best_i = other_i;
    }
  }
  __shared__ float warp_best[kThreads / 32];
  __shared__ int warp_index[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    warp_best[warp] = best;
    warp_index[warp] = best_i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w)
      if (ranks_before(warp_best[w], warp_index[w], best, best_i)) {
        best = warp_best[w];
        best_i = warp_index[w];
      }
    out[blockIdx.x] = best_i;
  }
}

}  // namespace

Status argmax_cuda(const float* logits, std::int64_t rows, std::int32_t vocab, std::int32_t* out, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(rows >= 0 && rows <= INT_MAX && vocab >= 1, "argmax_cuda: bad shape"));
  if (rows == 0) return Status::Ok();
  argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, out);
  SY_RETURN_IF_ERROR(detail::check_launch("argmax_cuda"));
  return Status::Ok();
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_argmax_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(argmax_kernel)});
}

}  // namespace sy::kernels
