// Our tensor-core grouped linear (grouped_tensor_core.cu): y[m, N] = x[m, K] · Wᵀ for many
// problems of one N, K and 16-bit weight type in one launch, for the row counts past the
// small-m kernel's bound (prompts), where cuBLAS runs one GemmEx per problem because it does
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

// Why the kernel cannot take these problems (empty when it can): bf16 or f16 weights, N a
// multiple of kTensorCoreCols, K of kTensorCoreDepth, every x and W 16-byte aligned.
std::string tensor_core_refusal(const GroupedLinearProblem* problems, std::int64_t count, std::int64_t N,
                                std::int64_t K, DType type);

// Queues the kernel over every problem with rows (m = 0 is skipped); x in the weight type.
// The caller checked tensor_core_refusal.
Status grouped_tensor_core_cuda(const GroupedLinearProblem* problems, std::int64_t count, std::int64_t N,
                                std::int64_t K, DType type, GroupedGemmWorkspace& ws, cudaStream_t stream);

// True when the environment says SY_CUDA_TENSOR_CORE=1: until a GPU run has measured the
// kernel against cuBLAS, grouped_linear_cuda takes it only when asked (here or by the
// workspace's tensor_core).
bool tensor_core_enabled_by_env();

}  // namespace sy::kernels
