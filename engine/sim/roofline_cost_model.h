// The sim backend's clock: how long a kernel of a given model shape takes on a device profile,
// by the roofline of its FLOPs and bytes with a small-batch efficiency curve for the GEMMs.
#pragma once

#include <cstdint>
#include <span>

#include "engine/sim/cost_model.h"
#include "engine/model/model_config.h"
#include "engine/sim/hardware_profile.h"

namespace sy {

class RooflineCostModel final : public CostModel {
 public:
  // bf16 weights, activations and KV cache, as every paper's setup. tensor_parallel splits each
  // kernel's FLOPs and bytes over that many devices of one node (its all-reduce is not modelled).
  RooflineCostModel(const HardwareProfile& profile, const ModelConfig& config, std::int32_t tensor_parallel = 1);

  std::int64_t attention_ns(std::int32_t block, std::int64_t tokens, std::int64_t context) const override;
  std::int64_t experts_ns(std::int32_t block, std::span<const std::int64_t> tokens_per_expert) const override;
  std::int64_t shared_expert_ns(std::int32_t block, std::int64_t tokens) const override;
  std::int64_t sample_ns(std::int64_t tokens) const override;

  // One GEMM of a [params]-sized bf16 weight over `tokens` rows: max(compute, weight streaming)
  // plus the kernel overhead. Compute runs at peak · gemm_efficiency · n / (n + half_tokens).
  double gemm_ns(double params, double tokens) const;
  // Reading `bytes` from HBM at its achievable bandwidth.
  double stream_ns(double bytes) const;

 private:
  double shared_ns(std::int32_t block, double tokens) const;
  HardwareProfile hw_;
  ModelConfig config_;
  double tp_;
};

}  // namespace sy
