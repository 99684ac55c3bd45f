// linear_fused (gemm_paths.h): the decode kernel. Each output is a dot product of an activation
// row with a weight row read directly in bf16/f16/f32; rows of W are split across threads.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_paths.h"

namespace sy::kernels::detail {
namespace {

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 16;

template <DType T>
SY_TARGET_AVX2 inline __m256 load8(const void* row, std::int64_t k) {
  if constexpr (T == DType::F32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + k);
  } else if constexpr (T == DType::BF16) {
    return avx2::load_bf16(static_cast<const std::uint16_t*>(row) + k);
  } else {
    return avx2::load_f16(static_cast<const std::uint16_t*>(row) + k);
  }
}

template <DType T>
inline float load1(const void* row, std::int64_t k) {
  if constexpr (T == DType::F32) {
    return static_cast<const float*>(row)[k];
  } else if constexpr (T == DType::BF16) {
    return bf16_to_f32(static_cast<const std::uint16_t*>(row)[k]);
  } else {
    return f16_to_f32(static_cast<const std::uint16_t*>(row)[k]);
  }
}

// out[m·RW + r] = Σ_k x[m, k] · w_r[k] for MX activation rows and RW weight rows. Each weight
// vector is widened once and used MX times; MX·RW + RW + 1 registers fit the 16 ymm.
template <DType T, int RW, int MX>
SY_TARGET_AVX2 void dot_tile(const void* const* w, const float* x, std::int64_t ldx, std::int64_t K, float* out) {
  __m256 acc[MX][RW];
  for (int m = 0; m < MX; ++m)
    for (int r = 0; r < RW; ++r) acc[m][r] = _mm256_setzero_ps();
  std::int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 wv[RW];
    for (int r = 0; r < RW; ++r) wv[r] = load8<T>(w[r], k);
    for (int m = 0; m < MX; ++m) {
      const __m256 xv = _mm256_loadu_ps(x + m * ldx + k);
      for (int r = 0; r < RW; ++r) acc[m][r] = _mm256_fmadd_ps(wv[r], xv, acc[m][r]);
    }
  }
  for (int m = 0; m < MX; ++m)
    for (int r = 0; r < RW; ++r) out[m * RW + r] = avx2::hsum(acc[m][r]);
  for (; k < K; ++k)
    for (int r = 0; r < RW; ++r) {
      const float wk = load1<T>(w[r], k);
      for (int m = 0; m < MX; ++m) out[m * RW + r] += x[m * ldx + k] * wk;
    }
}

// All M rows against RW weight rows, two activation rows per tile.
template <DType T, int RW>
SY_TARGET_AVX2 void dot_rows(const void* const* w, const float* x, std::int64_t M, std::int64_t K, float* out) {
  std::int64_t m = 0;
  for (; m + 2 <= M; m += 2) dot_tile<T, RW, 2>(w, x + m * K, K, K, out + m * RW);
  if (m < M) dot_tile<T, RW, 1>(w, x + m * K, K, K, out + m * RW);
}

// Output columns [n0, n0 + count) of every row, count ≤ 4.
template <DType T>
SY_TARGET_AVX2 void fused_block(const LinearArgs& a, std::int64_t n0, std::int64_t count) {
  const std::int64_t N = a.w->rows;
  const std::int64_t K = a.w->cols;
  float out[kFusedMaxRows * 4];
  const void* rows[4];
  if (count == 4) {
    for (int r = 0; r < 4; ++r) rows[r] = a.w->row(n0 + r);
    dot_rows<T, 4>(rows, a.x, a.M, K, out);
  } else {
    // Fewer than four rows left: one at a time, laid out as if RW were 4.
    for (std::int64_t r = 0; r < count; ++r) {
      rows[0] = a.w->row(n0 + r);
      float single[kFusedMaxRows];
      dot_rows<T, 1>(rows, a.x, a.M, K, single);
      for (std::int64_t m = 0; m < a.M; ++m) out[m * 4 + r] = single[m];
    }
  }
  for (std::int64_t m = 0; m < a.M; ++m) {
    float* yrow = a.y + m * N + n0;
    for (std::int64_t r = 0; r < count; ++r) {
      float base = a.accumulate ? yrow[r] : 0.0f;
      if (a.bias != nullptr) base += a.bias[n0 + r];
      yrow[r] = base + out[m * 4 + r];
    }
  }
}

template <DType T>
void run(const LinearArgs& a) {
  const std::int64_t N = a.w->rows;
  const std::int64_t blocks = (N + 3) / 4;
  const int threads = a.M * N * a.w->cols < kParallelMinWork ? 1 : num_threads();
  // Static schedule: each thread streams one contiguous slab of W.
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) fused_block<T>(a, b * 4, std::min<std::int64_t>(4, N - b * 4));
}

}  // namespace

void linear_fused(const LinearArgs& a) {
  switch (a.w->dtype) {
    case DType::F32: return run<DType::F32>(a);
    case DType::BF16: return run<DType::BF16>(a);
    case DType::F16: return run<DType::F16>(a);
  }
}

}  // namespace sy::kernels::detail
