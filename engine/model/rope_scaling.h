// The RoPE variants of Hugging Face configs (`rope_scaling` / `rope_parameters`) and the inverse
// frequencies and cos/sin factor transformers derives from each (modeling_rope_utils.py).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sy {

// The variants whose frequencies are fixed when the model loads. transformers' `dynamic` and
// `longrope` change them with the length of the batch being run, which a server batching
// sequences of different lengths cannot reproduce per sequence: they are refused on load.
enum class RopeType { Default, Linear, Yarn, Llama3 };

// "default", "linear", "yarn", "llama3" (the rope_type strings).
const char* rope_type_name(RopeType type);

struct RopeScaling {
  RopeType type = RopeType::Default;
  double factor = 1.0;                                // linear, yarn, llama3
  std::int32_t original_max_position_embeddings = 0;  // yarn, llama3: the pretraining context
  // yarn: the cos/sin factor when given, else 0.1·ln(factor) + 1, or the ratio of that with
  // mscale over that with mscale_all_dim when both are non-zero (DeepSeek's form).
  std::optional<double> attention_factor;
  double mscale = 0;
  double mscale_all_dim = 0;
  double beta_fast = 32;  // yarn: the correction range, in rotations
  double beta_slow = 1;
  bool truncate = true;   // yarn: round the correction range outwards to whole dimensions
  double low_freq_factor = 1;   // llama3
  double high_freq_factor = 4;  // llama3

  bool scaled() const { return type != RopeType::Default; }
  bool operator==(const RopeScaling&) const = default;
};

// What the rotary kernels take: head_dim / 2 inverse frequencies, and the factor cos and sin are
// multiplied by (transformers' attention_scaling; 1 except for yarn).
struct RopeFrequencies {
  std::vector<float> inv_freq;
  float attention_scaling = 1.0f;
};

// transformers' ROPE_INIT_FUNCTIONS for these types, with its float32 roundings: every tensor
// step is one float32 operation (a Python scalar taken as a float32 operand, `x / tensor` as
// tensor.reciprocal() · x as torch evaluates it), every scalar step a double one.
RopeFrequencies rope_frequencies(std::int32_t head_dim, double theta, const RopeScaling& scaling);

}  // namespace sy
