// Test support for the kernel suites: seeded random data, weights in every dtype, naive
// double-precision reference kernels and the normalised error used to compare against them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cpu/weight_view.h"

namespace sy::test {

using kernels::DType;

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }
  int integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }
  std::vector<float> uniform_vector(std::size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(lo, hi);
    return v;
  }
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
};

// A weight matrix stored in `dtype`, with the exact float values that storage represents
// (the reference computes with those, so the comparison isolates the kernel's arithmetic).
struct TestWeight {
  DType dtype = DType::F32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<std::uint8_t> bytes;
  std::vector<float> values;

  kernels::WeightView view() const { return {bytes.data(), dtype, rows, cols}; }
};

inline TestWeight make_weight(Rng& rng, DType dtype, std::int64_t rows, std::int64_t cols, float scale = 1.0f) {
  TestWeight w;
  w.dtype = dtype;
  w.rows = rows;
  w.cols = cols;
  const auto n = static_cast<std::size_t>(rows * cols);
  std::vector<float> raw = rng.uniform_vector(n, -scale, scale);
  w.bytes.resize(n * kernels::dtype_size(dtype));
  w.values.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::F32:
        std::memcpy(w.bytes.data() + 4 * i, &raw[i], 4);
        w.values[i] = raw[i];
        break;
      case DType::BF16: {
        const std::uint16_t h = kernels::f32_to_bf16(raw[i]);
        std::memcpy(w.bytes.data() + 2 * i, &h, 2);
        w.values[i] = kernels::bf16_to_f32(h);
        break;
      }
      case DType::F16: {
        const std::uint16_t h = kernels::f32_to_f16(raw[i]);
        std::memcpy(w.bytes.data() + 2 * i, &h, 2);
        w.values[i] = kernels::f16_to_f32(h);
        break;
      }
    }
  }
  return w;
}

// Σ (out − ref)² / Σ ref², the measure of llama.cpp's test-backend-ops: about (relative
// error)², so float32 rounding gives ~1e-14 and a wrong element among thousands gives ≳1e-4.
inline double nmse(const float* out, const double* ref, std::size_t n) {
  double err = 0.0;
  double norm = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(out[i]) - ref[i];
    err += d * d;
    norm += ref[i] * ref[i];
  }
  if (std::isnan(err)) return INFINITY;
  return norm > 0.0 ? err / norm : err;
}
inline double nmse(const std::vector<float>& out, const std::vector<double>& ref) {
  return out.size() == ref.size() ? nmse(out.data(), ref.data(), out.size()) : INFINITY;
}

// ---- naive reference kernels, written from the definitions with double accumulation ----

// y[m, n] = (accumulate ? y0 : 0) + bias[n] + Σ_k x[m, k] · W[n, k]
inline std::vector<double> ref_linear(const std::vector<float>& x, std::int64_t M, const TestWeight& w,
                                      const float* bias, const std::vector<float>* y0) {
  std::vector<double> y(static_cast<std::size_t>(M * w.rows));
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < w.rows; ++n) {
      double acc = y0 != nullptr ? static_cast<double>((*y0)[static_cast<std::size_t>(m * w.rows + n)]) : 0.0;
      if (bias != nullptr) acc += bias[n];
      for (std::int64_t k = 0; k < w.cols; ++k)
        acc += static_cast<double>(x[static_cast<std::size_t>(m * w.cols + k)]) *
               w.values[static_cast<std::size_t>(n * w.cols + k)];
      y[static_cast<std::size_t>(m * w.rows + n)] = acc;
    }
  return y;
}

inline double ref_silu(double g) { return g / (1.0 + std::exp(-g)); }

// Runs `body` once with the AVX2 kernels (when the CPU has them) and once with the scalar
// fallbacks, labelling failures with the path.
template <class Body>
void for_each_path(Body&& body) {
  for (const bool scalar : {false, true}) {
    kernels::cpu_force_scalar(scalar);
    const std::string label = scalar ? "scalar path" : (kernels::cpu_has_avx2() ? "avx2 path" : "scalar path (no avx2)");
    body(label);
  }
  kernels::cpu_force_scalar(false);
}

inline const char* dtype_label(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

}  // namespace sy::test
