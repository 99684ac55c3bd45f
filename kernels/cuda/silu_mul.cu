// silu_mul_cuda: elementwise h = g / (1 + exp(-g)) · u, the form torch's silu kernel uses.
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace sy::kernels {
namespace {

constexpr int kThreads = 256;

// No __restrict__: h may alias g or u (each element is read before it is written).
__global__ void silu_mul_kernel(const float* g, const float* u, float* h, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const float x = g[i];
    h[i] = x / (1.0f + expf(-x)) * u[i];
  }
}

}  // namespace

Status silu_mul_cuda(const float* g, const float* u, float* h, std::int64_t n, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n >= 0, "silu_mul_cuda: negative size"));
  if (n == 0) return Status::Ok();
  silu_mul_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(g, u, h, n);
  SY_RETURN_IF_ERROR(detail::check_launch("silu_mul_cuda"));
  return Status::Ok();
}

}  // namespace sy::kernels
