// rope_cuda: one block per token; each thread owns frequency pairs and rotates them in all heads.
#include <climits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kThreads = 64;

__global__ void __launch_bounds__(kThreads) rope_kernel(float* x, int n_heads, int head_dim,
                                                        const float* __restrict__ inv_freq,
                                                        const std::int32_t* __restrict__ positions, float scale) {
  const long long token = blockIdx.x;
  const int half = head_dim / 2;
  const float pos = static_cast<float>(positions[token]);
  for (int i = threadIdx.x; i < half; i += kThreads) {
    // float32 angle as in transformers; explicit _rn operations keep nvcc from fusing the
    // products into FMAs, so each term is rounded exactly as on the CPU.
    const float angle = __fmul_rn(pos, inv_freq[i]);
    float s, c;
    sincosf(angle, &s, &c);
    // transformers' attention_scaling multiplies cos and sin (1 unless the config asks for yarn).
    c = __fmul_rn(c, scale);
    s = __fmul_rn(s, scale);
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (token * n_heads + h) * head_dim;
      const float a = v[i];
      const float b = v[i + half];
      v[i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
      v[i + half] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
    }
  }
}

}  // namespace

Status rope_cuda(float* x, std::int64_t n_tokens, std::int32_t n_heads, std::int32_t head_dim, const float* inv_freq,
               const std::int32_t* positions, float attention_scaling, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n_tokens >= 0 && n_tokens <= INT_MAX && n_heads >= 0 && head_dim > 0 && head_dim % 2 == 0,
                  "rope_cuda: bad shape"));
  if (n_tokens == 0 || n_heads == 0) return Status::Ok();
  rope_kernel<<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(x, n_heads, head_dim, inv_freq, positions,
                                                                     attention_scaling);
  SY_RETURN_IF_ERROR(detail::check_launch("rope_cuda"));
  return Status::Ok();
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_rope_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(rope_kernel)});
}

}  // namespace sy::kernels
