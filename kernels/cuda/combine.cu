// combine_cuda (the token pool's merge), gather_rows_cuda and copy_rows_cuda: over rows.
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kThreads = 256;

// Additions only, in ModelOps::combine's order (slot 0, 1, .., K-1, then shared), so the sum
// is bit-identical to the CPU's.
__global__ void combine_kernel(const float* __restrict__ slot_out, const float* __restrict__ shared, long long n,
                               int K, long long H, float* __restrict__ hidden) {
  const long long total = n * H;
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < total; i += stride) {
    const long long t = i / H, c = i % H;
    const float* first = slot_out + t * K * H + c;
    float acc = first[0];
    for (int r = 1; r < K; ++r) acc += first[static_cast<long long>(r) * H];
    if (shared != nullptr) acc += shared[i];
    hidden[i] += acc;
  }
}

__global__ void gather_rows_kernel(const float* __restrict__ src, const std::int32_t* __restrict__ rows, long long n,
                                   long long width, float* __restrict__ dst) {
  const long long total = n * width;
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < total; i += stride) {
    const long long r = i / width;
    dst[i] = src[static_cast<long long>(rows[r]) * width + i % width];
  }
}

// One block per row: rows are wide (hidden size), so each block copies a whole row coalesced.
__global__ void copy_rows_kernel(const float* const* __restrict__ src_rows, float* const* __restrict__ dst_rows,
                                 long long width) {
  const float* src = src_rows[blockIdx.x];
  float* dst = dst_rows[blockIdx.x];
  for (long long i = threadIdx.x; i < width; i += kThreads) dst[i] = src[i];
}

}  // namespace

Status copy_rows_cuda(const float* const* src_rows, float* const* dst_rows, std::int64_t n, std::int64_t width,
                      cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n >= 0 && n <= 0x7fffffffLL && width >= 0, "copy_rows_cuda: bad shape"));
  if (n == 0 || width == 0) return Status::Ok();
  copy_rows_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(src_rows, dst_rows, width);
  return detail::check_launch("copy_rows_cuda");
}

Status combine_cuda(const float* slot_out, const float* shared, std::int64_t n, std::int32_t K, std::int64_t H,
                    float* hidden, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n >= 0 && K >= 1 && H >= 0, "combine_cuda: bad shape"));
  if (n == 0 || H == 0) return Status::Ok();
  combine_kernel<<<detail::grid_for(n * H, kThreads), kThreads, 0, stream>>>(slot_out, shared, n, K, H, hidden);
  return detail::check_launch("combine_cuda");
}

Status gather_rows_cuda(const float* src, const std::int32_t* rows, std::int64_t n, std::int64_t width, float* dst,
                        cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n >= 0 && width >= 0, "gather_rows_cuda: bad shape"));
  if (n == 0 || width == 0) return Status::Ok();
  gather_rows_kernel<<<detail::grid_for(n * width, kThreads), kThreads, 0, stream>>>(src, rows, n, width, dst);
  return detail::check_launch("gather_rows_cuda");
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_combine_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(combine_kernel),
                         SY_KERNEL_ENTRY(gather_rows_kernel),
                         SY_KERNEL_ENTRY(copy_rows_kernel)});
}

}  // namespace sy::kernels
