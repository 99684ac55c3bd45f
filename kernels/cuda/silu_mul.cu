// silu_mul_cuda: elementwise h = g / (1 + exp(-g)) · u, the form torch's silu kernel uses;
// sigmoid_cuda: the shared expert's gate, 1 / (1 + exp(-x)) as ModelOps::shared_expert.
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_preload.h"

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

__global__ void sigmoid_kernel(float* x, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride)
    x[i] = 1.0f / (1.0f + expf(-x[i]));
}

}  // namespace

Status sigmoid_cuda(float* x, std::int64_t n, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n >= 0, "sigmoid_cuda: negative size"));
  if (n == 0) return Status::Ok();
  sigmoid_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(x, n);
  return detail::check_launch("sigmoid_cuda");
}

Status silu_mul_cuda(const float* g, const float* u, float* h, std::int64_t n, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n >= 0, "silu_mul_cuda: negative size"));
  if (n == 0) return Status::Ok();
  silu_mul_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(g, u, h, n);
  SY_RETURN_IF_ERROR(detail::check_launch("silu_mul_cuda"));
  return Status::Ok();
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_silu_mul_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(silu_mul_kernel),
                         SY_KERNEL_ENTRY(sigmoid_kernel)});
}

}  // namespace sy::kernels
