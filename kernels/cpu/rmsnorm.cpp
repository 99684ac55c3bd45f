#include "kernels/cpu/rmsnorm.h"

#include <immintrin.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"

namespace sy::kernels {
namespace {

constexpr std::int64_t kParallelMinElements = std::int64_t{1} << 15;

// Σ x² in float32 over eight lanes, as torch's vectorised float reduction does.
SY_TARGET_AVX2 float sum_squares_avx2(const float* x, std::int64_t n) {
  __m256 a0 = _mm256_setzero_ps();
  __m256 a1 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i);
    const __m256 v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(v, v, a0);
  }
  float s = avx2::hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

SY_TARGET_AVX2 void scale_avx2(const float* x, const float* w, float r, std::int64_t n, float* y) {
  const __m256 rv = _mm256_set1_ps(r);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(_mm256_loadu_ps(x + i), rv)));
  for (; i < n; ++i) y[i] = w[i] * (x[i] * r);
}

float sum_squares(const float* x, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

}  // namespace

void rmsnorm(const float* x, const void* weight, DType weight_type, float eps, std::int64_t rows,
             std::int64_t dim, float* y) {
  if (rows <= 0 || dim <= 0) return;
  // The weight is tiny next to the activations: widen it once per call.
  thread_local std::vector<float> w32;
  w32.resize(static_cast<std::size_t>(dim));
  convert_to_f32(weight, weight_type, w32.data(), static_cast<std::size_t>(dim));
  const float* w = w32.data();
  const bool vector = cpu_has_avx2();
  const int threads = rows * dim < kParallelMinElements ? 1 : num_threads();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float ss = vector ? sum_squares_avx2(xr, dim) : sum_squares(xr, dim);
    // HF: x · rsqrt(mean(x²) + eps), then weight · that; rsqrt is a correctly rounded 1/sqrt.
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    if (vector) {
      scale_avx2(xr, w, inv, dim, yr);
    } else {
      for (std::int64_t i = 0; i < dim; ++i) yr[i] = w[i] * (xr[i] * inv);
    }
  }
}

}  // namespace sy::kernels
