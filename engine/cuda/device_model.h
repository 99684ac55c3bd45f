// The model weights one GPU needs, copied into its memory: the same LayerWeights views as the
// host's ModelWeights, with every pointer a device pointer. Uploaded once per GPU, shared by
// all the workers on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/model_weights.h"

namespace sy {

// What the workers of one GPU compute: attention (and everything on attention ranks: router,
// shared and dense MLPs, embedding, final norm, lm_head) and which routed experts.
struct DeviceModelNeeds {
  bool attention = false;
  std::vector<std::vector<bool>> experts;  // [layer][expert]; empty: none
  std::int64_t other_bytes = 0;            // KV caches and scratch, for the fit check
  std::string who;                         // "gpu0 (devices a0, a1, e0, e1)", for messages
};

class DeviceModel {
 public:
  // Checks that the weights plus needs.other_bytes fit the GPU's free memory (an error naming
  // the GPU, its devices, the need and what is free), then copies every needed tensor through
  // pinned staging with a progress bar.
  static StatusOr<std::shared_ptr<const DeviceModel>> upload(const ModelWeights& host, int gpu,
                                                             const DeviceModelNeeds& needs);
  // Bytes upload() would copy for these needs (the fit check, and memory planning).
  static std::int64_t bytes_needed(const ModelWeights& host, const DeviceModelNeeds& needs);

  ~DeviceModel();
  DeviceModel(const DeviceModel&) = delete;
  DeviceModel& operator=(const DeviceModel&) = delete;

  const ModelConfig& config() const { return config_; }
  int gpu() const { return gpu_; }
  // Device views; tensors this GPU does not need are null views.
  const kernels::WeightView& embed_tokens() const { return embed_tokens_; }
  const kernels::WeightView& lm_head() const { return lm_head_; }
  const VectorView& final_norm() const { return final_norm_; }
  const LayerWeights& layer(std::int32_t i) const { return layers_[static_cast<std::size_t>(i)]; }
  // RoPE's inverse frequencies (head_dim / 2 floats, kernels::Rope's), on the device.
  const float* inv_freq() const { return inv_freq_; }
  // The factor RoPE's cos and sin are scaled by (kernels::Rope::attention_scaling).
  float rope_attention_scaling() const { return rope_attention_scaling_; }
  // The weights' element type (one per model: linear layers run in it).
  kernels::DType dtype() const { return dtype_; }

 private:
  DeviceModel() = default;
  ModelConfig config_;
  int gpu_ = 0;
  void* memory_ = nullptr;
  kernels::WeightView embed_tokens_, lm_head_;
  VectorView final_norm_;
  std::vector<LayerWeights> layers_;
  const float* inv_freq_ = nullptr;
  float rope_attention_scaling_ = 1.0f;
  kernels::DType dtype_ = kernels::DType::BF16;
};

}  // namespace sy
