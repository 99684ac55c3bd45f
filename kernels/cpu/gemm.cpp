#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <climits>
#include <vector>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dtype.h"

namespace sy::kernels {
namespace {

// Up to this many activation rows the 16-bit weights are read directly by our kernel: decode
// is bound by streaming W from memory, and converting W to float32 first would triple the
// bytes moved. Above it sgemm's blocking wins and the conversion is amortised over M rows.
// Measured with bench_kernels on the 2-core AVX2 machine (see kernels/bench).
constexpr std::int64_t kFusedMaxM = 8;
// f32 weights take the same fused kernel only for a single row (where OpenBLAS's sgemm has
// noticeable per-call overhead); from two rows on sgemm is at least as fast.
constexpr std::int64_t kFusedMaxMF32 = 1;
// Target size of one converted float32 panel of W: big enough for sgemm to run at full speed,
// small enough to stay in L2/L3 while sgemm streams it.
constexpr std::int64_t kPanelBytes = std::int64_t{2} << 20;
// Below this many multiply-adds a parallel region costs more than it saves.
constexpr std::int64_t kParallelMinWork = std::int64_t{1} << 16;

int blas_int(std::int64_t v) {
  assert(v >= 0 && v <= INT_MAX);
  return static_cast<int>(v);
}

// Puts bias into y (or adds it, when accumulating) and returns the beta for the GEMM that
// follows, so that one pass produces x·Wᵀ + bias like torch's addmm.
float prepare_output(float* y, std::int64_t M, std::int64_t N, const float* bias, bool accumulate) {
  if (bias == nullptr) return accumulate ? 1.0f : 0.0f;
  for (std::int64_t m = 0; m < M; ++m) {
    float* row = y + m * N;
    if (accumulate) {
      for (std::int64_t n = 0; n < N; ++n) row[n] += bias[n];
    } else {
      std::copy(bias, bias + N, row);
    }
  }
  return 1.0f;
}

// ---- Fused small-M kernel: reads W in its own dtype, four rows at a time. ----

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

// out[m·RW + r] = Σ_k x[m, k] · w_r[k] for MX activation rows and RW weight rows. The weight
// vector is widened once and used MX times; MX·RW + RW + 1 registers stay within the 16 ymm.
template <DType T, int RW, int MX>
SY_TARGET_AVX2 void dot_tile(const void* const* w, const float* x, std::int64_t ldx, std::int64_t K,
                             float* out) {
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

// All M (≤ kFusedMaxM) rows against RW weight rows, two activation rows per tile.
template <DType T, int RW>
SY_TARGET_AVX2 void dot_rows(const void* const* w, const float* x, std::int64_t M, std::int64_t K,
                             float* out /*[M][RW]*/) {
  std::int64_t m = 0;
  for (; m + 2 <= M; m += 2) dot_tile<T, RW, 2>(w, x + m * K, K, K, out + m * RW);
  if (m < M) dot_tile<T, RW, 1>(w, x + m * K, K, K, out + m * RW);
}

struct FusedArgs {
  const float* x;
  std::int64_t M;
  const WeightView* w;
  const float* bias;
  float* y;
  bool accumulate;
};

// Output columns [n0, n0 + count) of every row, count ≤ 4.
template <DType T>
SY_TARGET_AVX2 void fused_block(const FusedArgs& a, std::int64_t n0, std::int64_t count) {
  const std::int64_t N = a.w->rows;
  const std::int64_t K = a.w->cols;
  float out[kFusedMaxM * 4];
  const void* rows[4];
  if (count == 4) {
    for (int r = 0; r < 4; ++r) rows[r] = a.w->row(n0 + r);
    dot_rows<T, 4>(rows, a.x, a.M, K, out);
  } else {
    // Tail of fewer than four rows: one row at a time, results laid out as if RW were 4.
    for (std::int64_t r = 0; r < count; ++r) {
      rows[0] = a.w->row(n0 + r);
      float single[kFusedMaxM];
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
void linear_fused(const FusedArgs& a) {
  const std::int64_t N = a.w->rows;
  const std::int64_t blocks = (N + 3) / 4;
  const int threads = a.M * N * a.w->cols < kParallelMinWork ? 1 : num_threads();
  // Static schedule: each thread streams one contiguous slab of W.
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) fused_block<T>(a, b * 4, std::min<std::int64_t>(4, N - b * 4));
}

// ---- Large-M path: 16-bit W converted panel by panel into float32 for sgemm. ----

void linear_panels(const float* x, std::int64_t M, const WeightView& w, const float* bias, float* y,
                   bool accumulate) {
  const std::int64_t N = w.rows;
  const std::int64_t K = w.cols;
  const float beta = prepare_output(y, M, N, bias, accumulate);
  std::int64_t panel_rows = std::max<std::int64_t>(16, kPanelBytes / (K * 4) / 16 * 16);
  panel_rows = std::min(panel_rows, N);
  // One buffer per calling thread, kept across calls: steady-state calls do not allocate.
  thread_local std::vector<float> panel;
  if (static_cast<std::int64_t>(panel.size()) < panel_rows * K) panel.resize(static_cast<std::size_t>(panel_rows * K));
  float* buf = panel.data();
  const int threads = panel_rows * K < kParallelMinWork ? 1 : num_threads();
  for (std::int64_t n0 = 0; n0 < N; n0 += panel_rows) {
    const std::int64_t rows = std::min(panel_rows, N - n0);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t r = 0; r < rows; ++r)
      convert_to_f32(w.row(n0 + r), w.dtype, buf + r * K, static_cast<std::size_t>(K));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(M), blas_int(rows), blas_int(K), 1.0f, x,
                blas_int(K), buf, blas_int(K), beta, y + n0, blas_int(N));
  }
}

}  // namespace

void linear(const float* x, std::int64_t M, const WeightView& w, const float* bias, float* y, bool accumulate) {
  const std::int64_t N = w.rows;
  const std::int64_t K = w.cols;
  if (M <= 0 || N <= 0) return;
  if (K == 0) {
    // No inputs: the product is zero, only the bias (and the old y) remain.
    if (!accumulate) std::fill(y, y + M * N, 0.0f);
    prepare_output(y, M, N, bias, true);
    return;
  }
  const FusedArgs args{x, M, &w, bias, y, accumulate};
  if (cpu_has_avx2()) {
    switch (w.dtype) {
      case DType::F32:
        if (M <= kFusedMaxMF32) return linear_fused<DType::F32>(args);
        break;
      case DType::BF16:
        if (M <= kFusedMaxM) return linear_fused<DType::BF16>(args);
        break;
      case DType::F16:
        if (M <= kFusedMaxM) return linear_fused<DType::F16>(args);
        break;
    }
  }
  if (w.dtype == DType::F32) {
    const float beta = prepare_output(y, M, N, bias, accumulate);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blas_int(M), blas_int(N), blas_int(K), 1.0f, x,
                blas_int(K), static_cast<const float*>(w.data), blas_int(K), beta, y, blas_int(N));
    return;
  }
  linear_panels(x, M, w, bias, y, accumulate);
}

void sgemm(bool b_transposed, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
           std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans, blas_int(M), blas_int(N),
              blas_int(K), alpha, A, blas_int(lda), B, blas_int(ldb), beta, C, blas_int(ldc));
}

const float* gemm_input(const float* x, std::int64_t n, DType type, GemmInputs inputs, std::vector<float>& rounded) {
  if (inputs == GemmInputs::Float32 || type == DType::F32 || n <= 0) return x;
  if (static_cast<std::int64_t>(rounded.size()) < n) rounded.resize(static_cast<std::size_t>(n));
  float* r = rounded.data();
  if (type == DType::BF16) {
    for (std::int64_t i = 0; i < n; ++i) r[i] = bf16_to_f32(f32_to_bf16(x[i]));
  } else {
    assert(type == DType::F16);
    for (std::int64_t i = 0; i < n; ++i) r[i] = f16_to_f32(f32_to_f16(x[i]));
  }
  return r;
}

}  // namespace sy::kernels
