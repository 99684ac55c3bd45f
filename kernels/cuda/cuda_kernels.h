// Host API of the CUDA kernels: plain C++ functions over device pointers, queued on a stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/status.h"

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/paged_attention.h"

// Each function mirrors the CPU kernel of the same name in kernels/cpu (same layouts, same
// semantics) so the cuda backend can be checked against the cpu backend. All pointers are
// device pointers unless stated; work is asynchronous on `stream`. Invalid arguments and
// launch failures come back as a Status naming the kernel and the CUDA error.
namespace sy::kernels {

// True when at least one CUDA device can be used. Any error from the runtime (no driver, error
// 35 "insufficient driver" on machines without a GPU, no device) means false.
bool cuda_device_available();

// NCCL's version code (e.g. 22809 for 2.28.9); works without a GPU.
StatusOr<int> nccl_version();

// rmsnorm (kernels/cpu/rmsnorm.h): `weight` is a device array of dim elements in weight_type.
Status rmsnorm_cuda(const float* x, const void* weight, DType weight_type, float eps, std::int64_t rows,
                  std::int64_t dim, float* y, cudaStream_t stream);

// Rope::apply (kernels/cpu/rope.h): inv_freq is a device copy of Rope::inv_freq() (head_dim/2
// floats), positions a device array of n_tokens.
Status rope_cuda(float* x, std::int64_t n_tokens, std::int32_t n_heads, std::int32_t head_dim, const float* inv_freq,
               const std::int32_t* positions, cudaStream_t stream);

// Decode attention for n_seqs sequences, one query each: q and out are [n_seqs, n_heads,
// head_dim]; sequence s attends to its cached positions 0..positions[s] through block table
// block_tables[s · table_stride ...] over the page layout of KvLayerView (k and v are device
// pools). Matches paged_attention (kernels/cpu/paged_attention.h) with n_tokens = 1.
// head_dim must be at most 256.
Status paged_attention_decode_cuda(const float* q, std::int32_t n_seqs, std::int32_t n_heads,
                                 const std::int32_t* positions, const KvLayerView& cache,
                                 const std::int32_t* block_tables, std::int32_t table_stride, float scale,
                                 float* out, cudaStream_t stream);

// silu_mul (kernels/cpu/swiglu.h): h = silu(g) · u. h may alias g or u.
Status silu_mul_cuda(const float* g, const float* u, float* h, std::int64_t n, cudaStream_t stream);

// router_topk (kernels/cpu/router.h); n_experts at most 256.
Status router_topk_cuda(const float* logits, std::int64_t n_tokens, std::int32_t n_experts, std::int32_t k,
                      bool renormalize, std::int32_t* expert_ids, float* weights, cudaStream_t stream);

// argmax (kernels/cpu/sampling.h) of each of `rows` rows of `vocab` logits into out[rows].
Status argmax_cuda(const float* logits, std::int64_t rows, std::int32_t vocab, std::int32_t* out, cudaStream_t stream);

// float32 → bfloat16, rounding to nearest even like f32_to_bf16 (activations for linear_bf16_cuda).
Status f32_to_bf16_cuda(const float* src, std::uint16_t* dst, std::int64_t n, cudaStream_t stream);

// linear (kernels/cpu/gemm.h) for bf16 activations and weights through cuBLAS, float32
// accumulation and output: y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias[N]) (+ y when accumulate).
Status linear_bf16_cuda(cublasHandle_t handle, const std::uint16_t* x, std::int64_t M, const std::uint16_t* w,
                      std::int64_t N, std::int64_t K, const float* bias, float* y, bool accumulate,
                      cudaStream_t stream);

}  // namespace sy::kernels
