// embedding_cuda: one block per token row, the row widened from the table's storage type.
#include <climits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    embedding_kernel(const void* __restrict__ table, DType type, long long rows, long long cols,
                     const std::int32_t* __restrict__ tokens, float* __restrict__ out) {
  const long long t = blockIdx.x;
  const long long id = tokens[t];
  float* dst = out + t * cols;
  const bool valid = id >= 0 && id < rows;
  for (long long i = threadIdx.x; i < cols; i += kThreads)
    dst[i] = valid ? detail::load_weight(table, type, id * cols + i) : 0.0f;
}

}  // namespace

Status embedding_cuda(const void* table, DType type, std::int64_t rows, std::int64_t cols,
                      const std::int32_t* tokens, std::int64_t n, float* out, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(rows >= 0 && cols >= 0 && n >= 0 && n <= INT_MAX, "embedding_cuda: bad shape"));
  if (n == 0 || cols == 0) return Status::Ok();
  embedding_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(table, type, rows, cols, tokens, out);
  return detail::check_launch("embedding_cuda");
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_embedding_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(embedding_kernel)});
}

}  // namespace sy::kernels
