#include "kernels/cpu/swiglu.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <new>
#include <utility>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"

namespace sy::kernels {
namespace {

constexpr std::int64_t kParallelMinElements = std::int64_t{1} << 15;

// torch's silu kernel computes x / (1 + exp(-x)); so do we.
SY_TARGET_AVX2 void silu_mul_avx2(const float* g, const float* u, float* h, std::int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(one, avx2::exp(_mm256_xor_ps(x, sign))));
    _mm256_storeu_ps(h + i, _mm256_mul_ps(silu, _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) h[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

float* allocate(std::int64_t elements) {
  // 64-byte alignment: whole cache lines, and aligned AVX loads would be legal.
  const std::size_t bytes = (static_cast<std::size_t>(elements) * sizeof(float) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<float*>(p);
}

}  // namespace

void silu_mul(const float* g, const float* u, float* h, std::int64_t n) {
  if (n <= 0) return;
  if (!cpu_has_avx2()) {
    for (std::int64_t i = 0; i < n; ++i) h[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    return;
  }
  const int threads = n < kParallelMinElements ? 1 : num_threads();
  if (threads == 1) return silu_mul_avx2(g, u, h, n);
  // Contiguous chunks, multiples of 8 so only the last has a scalar tail.
  const std::int64_t chunk = (n / threads + 7) / 8 * 8;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const std::int64_t begin = std::min(n, t * chunk);
    const std::int64_t end = t == threads - 1 ? n : std::min(n, begin + chunk);
    silu_mul_avx2(g + begin, u + begin, h + begin, end - begin);
  }
}

SwigluScratch::SwigluScratch(SwigluScratch&& other) noexcept
    : gate(std::exchange(other.gate, nullptr)),
      up(std::exchange(other.up, nullptr)),
      capacity(std::exchange(other.capacity, 0)),
      rounded(std::move(other.rounded)) {}

SwigluScratch& SwigluScratch::operator=(SwigluScratch&& other) noexcept {
  if (this != &other) {
    std::free(gate);
    std::free(up);
    gate = std::exchange(other.gate, nullptr);
    up = std::exchange(other.up, nullptr);
    capacity = std::exchange(other.capacity, 0);
    rounded = std::move(other.rounded);
  }
  return *this;
}

SwigluScratch::~SwigluScratch() {
  std::free(gate);
  std::free(up);
}

void SwigluScratch::reserve(std::int64_t elements) {
  if (elements <= capacity) return;
  // Grow geometrically so a slowly rising batch size does not reallocate every step.
  const std::int64_t grown = std::max(elements, capacity + capacity / 2);
  float* new_gate = allocate(grown);
  float* new_up = nullptr;
  try {
    new_up = allocate(grown);
  } catch (...) {
    std::free(new_gate);
    throw;
  }
  std::free(gate);
  std::free(up);
  gate = new_gate;
  up = new_up;
  capacity = grown;
}

void swiglu_ffn(const float* x, std::int64_t M, const WeightView& gate, const WeightView& up, const WeightView& down,
                float* y, SwigluScratch& scratch, const float* row_scale, bool accumulate, GemmInputs inputs) {
  if (M <= 0) return;
  const std::int64_t I = gate.rows;
  const std::int64_t H = down.rows;
  // `up` later also holds down's output when it must be scaled before being added to y.
  scratch.reserve(M * std::max(I, H));
  const float* in = gemm_input(x, M * gate.cols, gate.dtype, inputs, scratch.rounded);
  linear(in, M, gate, nullptr, scratch.gate);
  linear(in, M, up, nullptr, scratch.up);
  silu_mul(scratch.gate, scratch.up, scratch.gate, M * I);
  // x's rounded copy is done with: `rounded` may take h's.
  const float* h = gemm_input(scratch.gate, M * I, down.dtype, inputs, scratch.rounded);
  if (row_scale == nullptr) {
    linear(h, M, down, nullptr, y, accumulate);
    return;
  }
  // HF scales the expert output by the routing weight after the down projection; doing the
  // same (rather than scaling h first) keeps the rounding order of the reference.
  float* out = accumulate ? scratch.up : y;
  linear(h, M, down, nullptr, out);
  for (std::int64_t m = 0; m < M; ++m) {
    const float s = row_scale[m];
    float* dst = y + m * H;
    const float* src = out + m * H;
    if (accumulate) {
      for (std::int64_t i = 0; i < H; ++i) dst[i] += src[i] * s;
    } else {
      for (std::int64_t i = 0; i < H; ++i) dst[i] = src[i] * s;
    }
  }
}

}  // namespace sy::kernels
