// scale_rows_cuda: y[r, :] *= scale[r], the routing or gate weight applied after an FFN's down
// projection (as swiglu_experts_cuda's last step and HF's expert modules do).
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void scale_rows_kernel(float* __restrict__ y, const float* __restrict__ scale, long long width,
                                  long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride)
    y[i] = y[i] * scale[i / width];
}

}  // namespace

Status scale_rows_cuda(float* y, const float* scale, std::int64_t rows, std::int64_t width, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(rows >= 0 && width > 0, "scale_rows_cuda: bad shape"));
  if (rows == 0) return Status::Ok();
  scale_rows_kernel<<<detail::grid_for(rows * width, kThreads), kThreads, 0, stream>>>(y, scale, width, rows * width);
  return detail::check_launch("scale_rows_cuda");
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_scale_rows_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(scale_rows_kernel)});
}

}  // namespace sy::kernels
