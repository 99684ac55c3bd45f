// grouped_tensor_core_cuda: many y = x·Wᵀ problems (one N, K, bf16/f16 type) in one launch on
// the tensor cores (WMMA 16×16×16, float32 accumulation). A CTA computes a 32-row × 128-feature
// tile of one problem: the tiles of every problem are one table, so a call over 128 experts of
// uneven row counts is one grid instead of cuBLAS's one GemmEx per expert. 32 rows per tile
// because a prompt of 512 tokens gives each of 128 experts about 32 rows (top-8): the weights
// are read once per problem and 32-row tile, and most of each tile's rows are real.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/grouped_tensor_core.h"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kBM = static_cast<int>(kTensorCoreRows);
constexpr int kBN = static_cast<int>(kTensorCoreCols);
constexpr int kBK = static_cast<int>(kTensorCoreDepth);
constexpr int kPad = 8;  // 16 bytes per shared row: a row is 80 bytes, so rows shift banks
constexpr int kLd = kBK + kPad;
constexpr int kCLd = kBN + 4;
constexpr int kWarps = 4;  // warp w computes all kBM rows of features [32w, 32w + 32)
constexpr int kThreads = kWarps * 32;
constexpr int kVec = 8;  // 16-bit elements per 16-byte load
// One pass of the threads' vectors covers kBM rows of a kBK-wide tile.
static_assert(kThreads / (kBK / kVec) == kBM && kBN % kBM == 0 && kBN == kWarps * 32 && kBK % 16 == 0);
constexpr std::int64_t kMaxTiles = 65535;  // a grid's y

// One CTA row of the grid: kBM (or fewer) rows of one problem, pointers at the tile's first row.
struct Tile {
  const void* x;  // [rows, K] in the weight type
  const void* w;  // [N, K]
  float* y;       // [rows, N]
  int rows;
};

constexpr std::size_t kTileBytes = sizeof(std::uint16_t) * (kBM + kBN) * kLd;
constexpr std::size_t kOutBytes = sizeof(float) * kBM * kCLd;
constexpr std::size_t kSmemBytes = kTileBytes > kOutBytes ? kTileBytes : kOutBytes;

template <class T>
__global__ void __launch_bounds__(kThreads) tensor_core_kernel(const Tile* __restrict__ tiles, int N, int K) {
  using namespace nvcuda;
  const Tile tile = tiles[blockIdx.y];
  const int n0 = blockIdx.x * kBN;
  const T* x = static_cast<const T*>(tile.x);
  const T* w = static_cast<const T*>(tile.w) + static_cast<long long>(n0) * K;
  // x and W tiles while the K loop runs, the float32 output tile after it.
  __shared__ __align__(128) unsigned char smem[kSmemBytes];
  T* as = reinterpret_cast<T*>(smem);  // [kBM][kLd]
  T* bs = as + kBM * kLd;              // [kBN][kLd]: W rows, read as Wᵀ (col-major B)
  float* cs = reinterpret_cast<float*>(smem);

  // Each thread moves one 16-byte vector of the x tile and four of the W tile per step;
  // the next step's are loaded into registers while this step's multiply runs.
  const int vr = threadIdx.x / (kBK / kVec), vc = (threadIdx.x % (kBK / kVec)) * kVec;
  constexpr int kRowsPerPass = kThreads / (kBK / kVec);
  uint4 ra, rb[kBN / kRowsPerPass];
  auto load = [&](int k0) {
    ra = vr < tile.rows ? *reinterpret_cast<const uint4*>(x + static_cast<long long>(vr) * K + k0 + vc)
                        : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int i = 0; i < kBN / kRowsPerPass; ++i)
      rb[i] = *reinterpret_cast<const uint4*>(w + static_cast<long long>(vr + i * kRowsPerPass) * K + k0 + vc);
  };
  auto store = [&] {
    *reinterpret_cast<uint4*>(as + vr * kLd + vc) = ra;
#pragma unroll
    for (int i = 0; i < kBN / kRowsPerPass; ++i) *reinterpret_cast<uint4*>(bs + (vr + i * kRowsPerPass) * kLd + vc) = rb[i];
  };

  const int warp = threadIdx.x / 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kBM / 16][2];
#pragma unroll
  for (int i = 0; i < kBM / 16; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  load(0);
  for (int k0 = 0; k0 < K; k0 += kBK) {
    __syncthreads();  // the previous step's fragments are loaded: the tiles may be overwritten
    store();
    __syncthreads();
    if (k0 + kBK < K) load(k0 + kBK);
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[kBM / 16];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b[2];
#pragma unroll
      for (int i = 0; i < kBM / 16; ++i) wmma::load_matrix_sync(a[i], as + i * 16 * kLd + kk, kLd);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], bs + (warp * 32 + j * 16) * kLd + kk, kLd);
#pragma unroll
      for (int i = 0; i < kBM / 16; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
  __syncthreads();  // every warp is done with the tiles: their memory becomes the output tile
#pragma unroll
  for (int i = 0; i < kBM / 16; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(cs + i * 16 * kCLd + warp * 32 + j * 16, acc[i][j], kCLd, wmma::mem_row_major);
  __syncthreads();
  // Only the tile's real rows go out, a row's 128 features by consecutive threads.
  for (int idx = threadIdx.x; idx < tile.rows * kBN; idx += kThreads) {
    const int r = idx / kBN, c = idx % kBN;
    tile.y[static_cast<long long>(r) * N + n0 + c] = cs[r * kCLd + c];
  }
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

std::string tensor_core_shape_refusal(std::int64_t N, std::int64_t K, DType type) {
  if (type != DType::BF16 && type != DType::F16) return "weights are neither bf16 nor f16";
  if (N % kTensorCoreCols != 0) return "N is no multiple of " + std::to_string(kTensorCoreCols);
  if (K % kTensorCoreDepth != 0) return "K is no multiple of " + std::to_string(kTensorCoreDepth);
  if (N > INT_MAX || K > INT_MAX) return "N or K beyond int";
  return {};
}

std::string tensor_core_refusal(const GroupedLinearProblem* problems, std::int64_t count, std::int64_t N,
                                std::int64_t K, DType type) {
  if (std::string shape = tensor_core_shape_refusal(N, K, type); !shape.empty()) return shape;
  std::int64_t tiles = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    if (problems[i].m <= 0) continue;
    if (!aligned16(problems[i].x) || !aligned16(problems[i].w)) return "an x or W is not 16-byte aligned";
    tiles += (problems[i].m + kTensorCoreRows - 1) / kTensorCoreRows;
  }
  if (tiles > kMaxTiles) return "more than " + std::to_string(kMaxTiles) + " row tiles";
  return {};
}

Status grouped_tensor_core_cuda(const GroupedLinearProblem* problems, std::int64_t count, std::int64_t N,
                                std::int64_t K, DType type, GroupedGemmWorkspace& ws, cudaStream_t stream) {
  const std::string refusal = tensor_core_refusal(problems, count, N, K, type);
  if (!refusal.empty()) return Status::Error("grouped_tensor_core_cuda: " + refusal);
  const std::int64_t esize = static_cast<std::int64_t>(dtype_size(type));
  std::vector<Tile> tiles;
  for (std::int64_t i = 0; i < count; ++i) {
    const GroupedLinearProblem& p = problems[i];
    for (std::int64_t r = 0; r < p.m; r += kTensorCoreRows)
      tiles.push_back({static_cast<const char*>(p.x) + r * K * esize, p.w, p.y + r * N,
                       static_cast<int>(std::min(kTensorCoreRows, p.m - r))});
  }
  if (tiles.empty()) return Status::Ok();
  const std::size_t bytes = tiles.size() * sizeof(Tile);
  SY_RETURN_IF_ERROR(ws.reserve_table(bytes));
  // From pageable memory the copy returns once staged; it is ordered before the kernel.
  SY_RETURN_IF_ERROR(detail::check_cuda(cudaMemcpyAsync(ws.table(), tiles.data(), bytes, cudaMemcpyHostToDevice, stream),
                                        "grouped_tensor_core_cuda: tile table upload"));
  const dim3 grid(static_cast<unsigned>(N / kTensorCoreCols), static_cast<unsigned>(tiles.size()));
  const auto* table = static_cast<const Tile*>(ws.table());
  if (type == DType::BF16) {
    tensor_core_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(table, static_cast<int>(N), static_cast<int>(K));
  } else {
    tensor_core_kernel<__half><<<grid, kThreads, 0, stream>>>(table, static_cast<int>(N), static_cast<int>(K));
  }
  return detail::check_launch("grouped_tensor_core_cuda");
}

bool tensor_core_enabled(const GroupedGemmWorkspace& ws) {
  const char* v = std::getenv("SY_CUDA_TENSOR_CORE");
  return ws.tensor_core && (v == nullptr || std::strcmp(v, "0") != 0);
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_grouped_tensor_core_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(tensor_core_kernel<__nv_bfloat16>), SY_KERNEL_ENTRY(tensor_core_kernel<__half>)});
}

}  // namespace sy::kernels
