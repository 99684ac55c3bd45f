// Rotary position embedding in the "rotate half" layout of Hugging Face Llama-family models.
#pragma once

#include <cstdint>
#include <vector>

namespace sy::kernels {

// Precomputed inverse frequencies for one head_dim and theta. As in transformers, inv_freq and
// the angle pos·inv_freq are computed in float32, so results match its rounding.
class Rope {
 public:
  Rope(std::int32_t head_dim, double theta);

  // Rotates x in place. x is [n_tokens, n_heads, head_dim]; token t sits at positions[t].
  // For i < head_dim/2: (x_i, x_{i+d/2}) -> (x_i·cos - x_{i+d/2}·sin, x_{i+d/2}·cos + x_i·sin).
  void apply(float* x, std::int64_t n_tokens, std::int32_t n_heads, const std::int32_t* positions) const;

  std::int32_t head_dim() const { return head_dim_; }
  // The head_dim/2 inverse frequencies (for device kernels that must rotate identically).
  const std::vector<float>& inv_freq() const { return inv_freq_; }

 private:
  std::int32_t head_dim_;
  std::vector<float> inv_freq_;
};

}  // namespace sy::kernels
