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
  // Frequencies a scaled variant derived (head_dim / 2 of them; engine/model/rope_scaling.h), and
  // the factor cos and sin are multiplied by before the rotation (transformers' attention_scaling).
  Rope(std::int32_t head_dim, std::vector<float> inv_freq, float attention_scaling);

  // Rotates x in place. x is [n_tokens, n_heads, head_dim]; token t sits at positions[t].
  // For i < head_dim/2: (x_i, x_{i+d/2}) -> (x_i·cos - x_{i+d/2}·sin, x_{i+d/2}·cos + x_i·sin),
  // cos and sin each times attention_scaling() in float32.
  void apply(float* x, std::int64_t n_tokens, std::int32_t n_heads, const std::int32_t* positions) const;

  std::int32_t head_dim() const { return head_dim_; }
  // The head_dim/2 inverse frequencies (for device kernels that must rotate identically).
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  float attention_scaling() const { return attention_scaling_; }

 private:
  std::int32_t head_dim_;
  std::vector<float> inv_freq_;
  float attention_scaling_ = 1.0f;
};

}  // namespace sy::kernels
