// When and how the small-m grouped kernel (grouped_small_m.cu) runs a grouped linear: the
// route choice and launch shape, plain C++ so that it is tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/dtype.h"

namespace sy::kernels {

// Rows of x one CTA keeps in shared memory and multiplies per weight read: a problem with more
// rows is split into pieces of at most this many (each piece reads its weights again).
constexpr std::int64_t kSmallMPieceRows = 16;
// The largest m routed to the kernel: beyond it cuBLAS's tensor cores win (a problem of 32
// rows is two pieces, its weights read twice).
constexpr std::int64_t kSmallMMaxRows = 32;
constexpr int kSmallMThreads = 256;
// Output features one warp computes at a time: each x value read from shared memory feeds
// this many FMAs, which keeps shared-memory bandwidth below the weights' HBM rate at m = 16.
constexpr int kSmallMRowsPerWarp = 4;
// Every CTA's feature tile is a multiple of the features its warps cover in one pass.
constexpr int kSmallMTileQuantum = (kSmallMThreads / 32) * kSmallMRowsPerWarp;

// Rows [row0, row0 + rows) of problem `problem`: one CTA row of the kernel's problem table.
struct SmallMPiece {
  std::int64_t problem = 0;
  std::int64_t row0 = 0;
  std::int64_t rows = 0;
};

struct SmallMRequest {
  std::vector<std::int64_t> ms;  // rows per problem; 0 = skipped
  std::int64_t N = 0;            // output features (weight rows)
  std::int64_t K = 0;            // input features (weight columns)
  DType type = DType::BF16;
  bool weights_aligned = false;  // every weight's base address is a multiple of 16 bytes
  std::size_t smem_limit = 0;    // the device's opt-in shared memory per block, bytes
  int sm_count = 0;              // the device's multiprocessors
  bool enabled = true;           // false: the caller forces cuBLAS
};

struct SmallMPlan {
  bool use = false;
  std::string why_not;            // when !use: the first condition that failed
  std::vector<SmallMPiece> pieces;
  int m_tile = 0;                 // 1, 2, 4, 8 or 16: the kernel instance (≥ every piece's rows)
  int rows_per_cta = 0;           // output features per CTA, a multiple of kSmallMTileQuantum
  std::int64_t tiles_per_piece = 0;
  std::int64_t blocks = 0;        // pieces × tiles_per_piece
  std::size_t smem_bytes = 0;     // the largest piece's rows of x as float32
  std::size_t smem_limit = 0;     // the request's: the kernel's shared-memory attribute is set to it
};

// Elements per 16-byte weight load: 8 for bf16/f16, 4 for f32. The kernel needs K to be a
// multiple of it so that every weight row starts 16-byte aligned.
constexpr std::int64_t small_m_vector_elems(DType t) { return 16 / static_cast<std::int64_t>(dtype_size(t)); }

// The route: use is true when every problem's m is ≤ kSmallMMaxRows, at least one is > 0,
// K is a multiple of small_m_vector_elems, the weights are aligned, the largest piece's
// rows of x fit in smem_limit and the grid fits; then the pieces and the launch shape.
SmallMPlan plan_small_m(const SmallMRequest& request);

// The most linears of one input that one dense small-m launch computes (q, k, v; gate, up and
// the shared expert's gate).
constexpr int kDenseSmallMMaxOutputs = 4;

// Dense linears at decode's row counts: y_j = x · W_jᵀ for up to kDenseSmallMMaxOutputs weights
// that share x [m, K] (float32, rounded to the weight type on the way in), through the small-m
// kernel's tiles in one launch whose arguments travel by value (no table), so CUDA graphs capture it.
struct DenseSmallMRequest {
  std::int64_t m = 0;
  std::int64_t K = 0;
  std::vector<std::int64_t> Ns;  // output features of each weight
  DType type = DType::BF16;
  bool weights_aligned = false;
  std::size_t smem_limit = 0;
  int sm_count = 0;
  bool enabled = true;
};

struct DenseSmallMPlan {
  bool use = false;
  std::string why_not;
  int m_tile = 0;
  int rows_per_cta = 0;
  std::vector<std::int64_t> tiles_begin;  // per output, then the total: CTA ranges in order
  std::int64_t blocks = 0;
  std::size_t smem_bytes = 0;
  std::size_t smem_limit = 0;
};

// use is true when 1 ≤ m ≤ kSmallMPieceRows (one piece: the weights are read once), there are
// 1..kDenseSmallMMaxOutputs outputs, and plan_small_m would run the same shape; the feature tile
// is plan_small_m's rule applied to all outputs' tiles together.
DenseSmallMPlan plan_dense_small_m(const DenseSmallMRequest& request);

// True when the environment says SY_CUDA_DENSE_SMALL_M=1: the cuda executor then runs its dense
// linears of up to kSmallMPieceRows rows through the small-m kernel instead of cuBLAS. Off by
// default until a GPU run has measured it against cuBLAS (README, issue 13).
bool dense_small_m_enabled_by_env();

// False when the environment says SY_CUDA_SMALL_M=0 (the cuBLAS path for every m, to compare).
bool small_m_enabled_by_env();

}  // namespace sy::kernels
