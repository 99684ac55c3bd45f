// rmsnorm_cuda: one block per row, block-wide sum of squares, then the scaled row.
#include <climits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kThreads = 256;

// x and y may alias (in place): every read of x happens before the barrier that precedes
// the writes, and each thread writes only the elements it read.
__global__ void __launch_bounds__(kThreads)
    rmsnorm_kernel(const float* x, const void* __restrict__ w, DType wt, float eps, long long dim, float* y) {
  const float* xr = x + static_cast<long long>(blockIdx.x) * dim;
  float* yr = y + static_cast<long long>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (long long i = threadIdx.x; i < dim; i += kThreads) ss += xr[i] * xr[i];
  ss = detail::warp_sum(ss);
  __shared__ float partial[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    ss = detail::warp_sum(lane < kThreads / 32 ? partial[lane] : 0.0f);
    if (lane == 0) partial[0] = ss;
  }
  __syncthreads();
  // Correctly rounded sqrt and division (no fast-math), as the CPU kernel and torch do.
  const float inv = 1.0f / sqrtf(partial[0] / static_cast<float>(dim) + eps);
  for (long long i = threadIdx.x; i < dim; i += kThreads) yr[i] = detail::load_weight(w, wt, i) * (xr[i] * inv);
}

}  // namespace

Status rmsnorm_cuda(const float* x, const void* weight, DType weight_type, float eps, std::int64_t rows,
                  std::int64_t dim, float* y, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(rows >= 0 && dim >= 0 && rows <= INT_MAX, "rmsnorm_cuda: bad shape"));
  if (rows == 0 || dim == 0) return Status::Ok();
  rmsnorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, weight_type, eps, dim, y);
  SY_RETURN_IF_ERROR(detail::check_launch("rmsnorm_cuda"));
  return Status::Ok();
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_rmsnorm_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(rmsnorm_kernel)});
}

}  // namespace sy::kernels
