// linear_cuda / linear_bf16_cuda (cuBLAS GemmEx, low-precision in, float32 accumulate and out)
// and f32_to_bf16_cuda.
#include <climits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kThreads = 256;

// The bit-level rounding of f32_to_bf16 (kernels/cpu/dtype.h), so both backends feed cuBLAS
// and the CPU kernels identical activations.
__global__ void f32_to_bf16_kernel(const float* __restrict__ src, std::uint16_t* __restrict__ dst, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    unsigned bits = __float_as_uint(src[i]);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      dst[i] = static_cast<std::uint16_t>((bits >> 16) | 0x40u);
    } else {
      bits += 0x7fffu + ((bits >> 16) & 1u);
      dst[i] = static_cast<std::uint16_t>(bits >> 16);
    }
  }
}

// y[m, n] = (accumulate ? y : 0) + bias[n]: the GEMM then adds x·Wᵀ with beta = 1, which is
// torch's addmm(bias, x, Wᵀ).
__global__ void bias_kernel(float* __restrict__ y, const float* __restrict__ bias, long long M, long long N,
                            bool accumulate) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < M * N; i += stride)
    y[i] = (accumulate ? y[i] : 0.0f) + bias[i % N];
}

}  // namespace

Status f32_to_bf16_cuda(const float* src, std::uint16_t* dst, std::int64_t n, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n >= 0, "f32_to_bf16_cuda: negative size"));
  if (n == 0) return Status::Ok();
  f32_to_bf16_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(src, dst, n);
  SY_RETURN_IF_ERROR(detail::check_launch("f32_to_bf16_cuda"));
  return Status::Ok();
}

Status linear_cuda(cublasHandle_t handle, const void* x, DType type, std::int64_t M, const void* w, std::int64_t N,
                   std::int64_t K, const float* bias, float* y, bool accumulate, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(M >= 0 && N >= 0 && K >= 0 && M <= INT_MAX && N <= INT_MAX && K <= INT_MAX,
                  "linear_cuda: bad shape"));
  if (M == 0 || N == 0) return Status::Ok();
  float beta = accumulate ? 1.0f : 0.0f;
  if (bias != nullptr) {
    bias_kernel<<<detail::grid_for(M * N, kThreads), kThreads, 0, stream>>>(y, bias, M, N, accumulate);
    SY_RETURN_IF_ERROR(detail::check_launch("linear_cuda (bias)"));
    beta = 1.0f;
  }
  const float alpha = 1.0f;
  const cudaDataType_t t = type == DType::BF16 ? CUDA_R_16BF : type == DType::F16 ? CUDA_R_16F : CUDA_R_32F;
  SY_RETURN_IF_ERROR(detail::use_stream(handle, stream));
  // cuBLAS is column-major: row-major y[M,N] is column-major yᵀ[N,M] = W[N,K] · xᵀ[K,M], where
  // row-major W[N,K] read column-major is Wᵀ (so op T) and row-major x[M,K] is xᵀ already.
  SY_RETURN_IF_ERROR(detail::check_cublas(
      cublas().gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                       static_cast<int>(K), &alpha, w, t, static_cast<int>(K), x, t, static_cast<int>(K), &beta, y,
                       CUDA_R_32F, static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "linear_cuda: cublasGemmEx"));
  return Status::Ok();
}

Status linear_bf16_cuda(cublasHandle_t handle, const std::uint16_t* x, std::int64_t M, const std::uint16_t* w,
                      std::int64_t N, std::int64_t K, const float* bias, float* y, bool accumulate,
                      cudaStream_t stream) {
  return linear_cuda(handle, x, DType::BF16, M, w, N, K, bias, y, accumulate, stream);
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_linear_bf16_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(f32_to_bf16_kernel),
                         SY_KERNEL_ENTRY(bias_kernel)});
}

}  // namespace sy::kernels
