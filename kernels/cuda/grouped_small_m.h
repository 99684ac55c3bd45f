// The small-m grouped linear kernel's launch API, shared by grouped_gemm.cu and expert_ffn.cu:
// y[m, N] = x[m, K] · Wᵀ for many decode-sized problems in one launch (plan: small_m_plan.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/small_m_plan.h"

namespace sy::kernels {

// How the kernel reads x (always rounded to the weight type exactly as convert_from_f32_cuda
// does before it multiplies, so results match the cpu kernels on rounded activations).
enum class SmallMInput : int {
  kLow = 0,      // x: [rows, K] already in the weight type (grouped_linear_cuda's input)
  kF32 = 1,      // x: [rows, K] float32, rounded while loading
  kSiluMul = 2,  // x: gate [rows, K], x2: up [rows, K] float32; silu(g)·u as silu_mul_low, rounded
};

// One row of the device problem table: a piece (≤ kSmallMPieceRows rows) of one problem, its
// pointers already offset to the piece's first row. Row strides: K for x and x2, N for y.
// The table holds no prefix of blocks: all problems of a call share N, so every piece has the
// same tiles_per_piece CTAs and CTA b works on piece b / tiles_per_piece.
struct SmallMProblem {
  const void* x;
  const float* x2;
  const void* w;       // [N, K] in the weight type, 16-byte aligned
  float* y;            // [rows, N] float32
  const float* scale;  // [rows] or null: y row r is multiplied by scale[r] (swiglu's row weights)
  long long rows;
};

// Queues the kernel over `table` (a device array of plan.pieces.size() entries, uploaded by
// the caller on `stream`). The plan must have use = true and come from a request of N, K, type.
Status grouped_small_m_cuda(const SmallMPlan& plan, const SmallMProblem* table, std::int64_t N, std::int64_t K,
                            DType type, SmallMInput input, cudaStream_t stream);

// One weight of a dense_small_m_cuda call: y [m, N] = (accumulate ? y : 0) + bias + x · wᵀ;
// bias may be null.
struct DenseSmallMOutput {
  const void* w = nullptr;  // [N, K] in the call's type, 16-byte aligned
  const float* bias = nullptr;
  float* y = nullptr;
  std::int64_t N = 0;
};

// The linears of one input x [m, K] (float32, rounded to `type` as convert_from_f32_cuda
// rounds; with x2, silu(x)·x2 rounded, as silu_mul_cuda then convert) to every output of
// `outs` in one launch (plan: plan_dense_small_m for these m, K, Ns and type). scale [m] may be
// null: each output row r is multiplied by scale[r] before bias and accumulate (swiglu's row
// weights, scale_rows_cuda). The arguments travel by value, so a CUDA graph captures the call.
Status dense_small_m_cuda(const DenseSmallMPlan& plan, const float* x, const float* x2, const float* scale,
                          std::int64_t m, std::int64_t K, DType type, const DenseSmallMOutput* outs, int count,
                          bool accumulate, cudaStream_t stream);

// plan_dense_small_m for `count` outputs of one input [m, K] in `type` on the current device
// (small_m_device_limits), each weight's alignment read from `outs`.
Status plan_dense_small_m_for(std::int64_t m, std::int64_t K, DType type, const DenseSmallMOutput* outs, int count,
                              DenseSmallMPlan& plan);

namespace detail {
// Copies `table` into the workspace's device table (grown as needed) on `stream` and returns
// it; the host vector may go once this returns (a pageable copy is staged first).
StatusOr<const SmallMProblem*> upload_small_m_table(const std::vector<SmallMProblem>& table,
                                                    GroupedGemmWorkspace& ws, cudaStream_t stream);
// plan_small_m for a call's problems: rows per problem, the weights of those with rows; asks
// the current device for its limits (enabled: the workspace's switch, and the environment's).
Status plan_small_m_for(const std::vector<std::int64_t>& ms, const std::vector<const void*>& weights, std::int64_t N,
                        std::int64_t K, DType type, bool enabled, SmallMPlan& plan);
}  // namespace detail

// The current device's opt-in shared memory per block and multiprocessor count, for the plan
// (read from the driver once per device).
Status small_m_device_limits(std::size_t& smem_limit, int& sm_count);

}  // namespace sy::kernels
