#include "kernels/cpu/rope.h"

#include <cassert>
#include <cmath>
#include <utility>

#include "kernels/cpu/gemm.h"

namespace sy::kernels {

Rope::Rope(std::int32_t head_dim, double theta) : head_dim_(head_dim) {
  assert(head_dim > 0 && head_dim % 2 == 0);
  // transformers: 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)), all in float32:
  // the exponent is a float32 quotient, the power a float32 pow of float32(base).
  const float base = static_cast<float>(theta);
  const std::int32_t half = head_dim / 2;
  inv_freq_.resize(static_cast<std::size_t>(half));
  for (std::int32_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv_freq_[static_cast<std::size_t>(i)] = 1.0f / std::pow(base, exponent);
  }
}

Rope::Rope(std::int32_t head_dim, std::vector<float> inv_freq, float attention_scaling)
    : head_dim_(head_dim), inv_freq_(std::move(inv_freq)), attention_scaling_(attention_scaling) {
  assert(head_dim > 0 && head_dim % 2 == 0 && inv_freq_.size() == static_cast<std::size_t>(head_dim / 2));
}

void Rope::apply(float* x, std::int64_t n_tokens, std::int32_t n_heads, const std::int32_t* positions) const {
  const std::int32_t half = head_dim_ / 2;
  const std::int64_t work = n_tokens * n_heads * head_dim_;
  const int threads = work < (std::int64_t{1} << 15) ? 1 : num_threads();
#pragma omp parallel num_threads(threads)
  {
    // cos/sin of one position, shared by all its heads; per thread and kept across calls.
    thread_local std::vector<float> cs;
    cs.resize(static_cast<std::size_t>(2 * half));
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      // The angle is the float32 product pos · inv_freq, as transformers' float32 matmul gives.
      const float pos = static_cast<float>(positions[t]);
      for (std::int32_t i = 0; i < half; ++i) {
        const float angle = pos * inv_freq_[static_cast<std::size_t>(i)];
        // transformers multiplies by attention_scaling always; by 1 it changes nothing.
        cs[static_cast<std::size_t>(i)] = std::cos(angle) * attention_scaling_;
        cs[static_cast<std::size_t>(half + i)] = std::sin(angle) * attention_scaling_;
      }
      const float* c = cs.data();
      const float* s = cs.data() + half;
      for (std::int32_t h = 0; h < n_heads; ++h) {
        float* v = x + (t * n_heads + h) * head_dim_;
        // (q · cos) + (rotate_half(q) · sin), each product rounded before the sum like torch.
        for (std::int32_t i = 0; i < half; ++i) {
          const float a = v[i];
          const float b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  }
}

}  // namespace sy::kernels
