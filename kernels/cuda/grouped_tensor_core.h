// Our tensor-core grouped linear (grouped_tensor_core.cu): y[m, N] = x[m, K] · Wᵀ for many
// problems of one N, K and 16-bit weight type in one launch, from kTensorCoreMinRows rows (below,
// the small-m kernel is the faster), where cuBLAS runs one GemmEx per problem because it does
// not group bf16/f16 inputs with float32 output (measured on an H100, README).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "base/status.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cuda/cuda_kernels.h"

namespace sy::kernels {

// Output tile of one CTA: kTensorCoreRows rows of one problem by kTensorCoreCols features,
// over K in steps of kTensorCoreDepth.
inline constexpr std::int64_t kTensorCoreRows = 32;
inline constexpr std::int64_t kTensorCoreCols = 128;
inline constexpr std::int64_t kTensorCoreDepth = 32;

// Rows of the largest problem from which the kernel takes a call even where the small-m kernel
// could: on an H100 (bench_cuda, 2026-11-28, Qwen3-30B-A3B's experts) it ran a 128-token
// decode's experts (16 rows at most) 1.65x faster than small-m, a 32-token one's (6 rows)
// 0.80x, and a 512-token prompt's 3.8x faster than cuBLAS.
inline constexpr std::int64_t kTensorCoreMinRows = 16;

// Why the kernel cannot take these problems (empty when it can): bf16 or f16 weights, N a
// multiple of kTensorCoreCols, K of kTensorCoreDepth, every x and W 16-byte aligned.
std::string tensor_core_refusal(const GroupedLinearProblem* problems, std::int64_t count, std::int64_t N,
                                std::int64_t K, DType type);
// The same for the shape alone (no pointers yet).
std::string tensor_core_shape_refusal(std::int64_t N, std::int64_t K, DType type);

// Queues the kernel over every problem with rows (m = 0 is skipped); x in the weight type.
// The caller checked tensor_core_refusal.
Status grouped_tensor_core_cuda(const GroupedLinearProblem* problems, std::int64_t count, std::int64_t N,
                                std::int64_t K, DType type, GroupedGemmWorkspace& ws, cudaStream_t stream);

// Whether a call on `ws` may take the kernel: the workspace's tensor_core (true unless a caller
// turns it off) and the environment (SY_CUDA_TENSOR_CORE=0 turns it off, to compare).
bool tensor_core_enabled(const GroupedGemmWorkspace& ws);

}  // namespace sy::kernels
