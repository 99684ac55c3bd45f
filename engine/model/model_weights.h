// The weights of one model, resolved by Hugging Face tensor name and checked against the config.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_check.h"
#include "kernels/cpu/weight_view.h"

namespace sy {

class Checkpoint;

// A 1-D tensor (norm weight) left in its checkpoint dtype.
struct VectorView {
  const void* data = nullptr;
  kernels::DType dtype = kernels::DType::F32;
  std::int64_t size = 0;
  bool empty() const { return data == nullptr; }
};

// One SwiGLU FFN: gate (w1) and up (w3) are [I, H], down (w2) is [H, I].
struct FfnWeights {
  kernels::WeightView gate, up, down;
  bool empty() const { return gate.empty(); }
};

struct LayerWeights {
  VectorView input_norm;
  VectorView post_attention_norm;
  kernels::WeightView q_proj, k_proj, v_proj, o_proj;
  const float* q_bias = nullptr;  // qwen2_moe only; converted to float32 at load
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  VectorView q_norm, k_norm;      // qwen3_moe (head_dim each), olmoe (each whole projection)
  bool sparse = false;
  FfnWeights dense_mlp;           // when !sparse
  kernels::WeightView router;     // [num_experts, H], when sparse
  std::vector<FfnWeights> experts;
  FfnWeights shared_expert;       // qwen2_moe only
  kernels::WeightView shared_expert_gate;  // [1, H]
};

class ModelWeights {
 public:
  // Reads DIR/config.json and the safetensors checkpoint (single file or sharded with
  // model.safetensors.index.json), memory-mapped. Every error names the file and the problem:
  // missing/truncated file, bad header, unknown dtype, missing tensor (named), a tensor the model
  // uses in a dtype it cannot compute with (named), shape that does not match the config (both
  // shapes named), unsupported model_type.
  // `check`: how the tensors the model uses are searched for NaN and ±inf (a corrupt checkpoint
  // is an error naming the tensor, not NaN logits later). `progress` (may be empty) hears the
  // bytes of those tensors checked so far and in all after each one (the check is what reads
  // the file).
  static StatusOr<std::shared_ptr<const ModelWeights>> load(
      const std::filesystem::path& dir, WeightCheck check = WeightCheck::Sampled,
      const std::function<void(std::uint64_t done, std::uint64_t total)>& progress = {});

  const ModelConfig& config() const { return config_; }
  const kernels::WeightView& embed_tokens() const { return embed_tokens_; }  // [V, H]
  const kernels::WeightView& lm_head() const { return lm_head_; }  // [V, H] (embed when tied)
  const VectorView& final_norm() const { return final_norm_; }
  const LayerWeights& layer(std::int32_t i) const { return layers_[i]; }
  const std::filesystem::path& dir() const { return dir_; }

  ModelWeights(ModelWeights&&) noexcept;
  ~ModelWeights();

 private:
  ModelWeights();
  std::filesystem::path dir_;
  ModelConfig config_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::vector<std::vector<float>> owned_;  // biases converted to float32
  kernels::WeightView embed_tokens_, lm_head_;
  VectorView final_norm_;
  std::vector<LayerWeights> layers_;
};

}  // namespace sy
