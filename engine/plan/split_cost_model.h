// A cost model for a disaggregated deployment whose attention and expert devices differ: the
// attention half of every block is timed on one device profile (and tensor-parallel degree),
// the experts on another. The planner and its simulator check share it, so they agree on
// kernel times by construction.
#pragma once

#include <cstdint>
#include <span>

#include "engine/model/model_config.h"
#include "engine/sim/cost_model.h"
#include "engine/sim/hardware_profile.h"
#include "engine/sim/roofline_cost_model.h"

namespace sy {

class SplitCostModel final : public CostModel {
 public:
  // A simulated "device" stands for one tensor-parallel group: tp_a GPUs of `attention` run a
  // block's attention, tp_e GPUs of `experts` run each expert.
  SplitCostModel(const ModelConfig& config, const HardwareProfile& attention, std::int32_t tp_a,
                 const HardwareProfile& experts, std::int32_t tp_e)
      : attention_(attention, config, tp_a), experts_(experts, config, tp_e) {}

  std::int64_t attention_ns(std::int32_t block, std::int64_t tokens, std::int64_t context) const override {
    return attention_.attention_ns(block, tokens, context);
  }
  std::int64_t experts_ns(std::int32_t block, std::span<const std::int64_t> tokens_per_expert) const override {
    return experts_.experts_ns(block, tokens_per_expert);
  }
  // The shared expert runs on the attention side.
  std::int64_t shared_expert_ns(std::int32_t block, std::int64_t tokens) const override {
    return attention_.shared_expert_ns(block, tokens);
  }
  // Sampling (final norm, lm_head) runs where the attention runs.
  std::int64_t sample_ns(std::int64_t tokens) const override { return attention_.sample_ns(tokens); }

 private:
  RooflineCostModel attention_, experts_;
};

}  // namespace sy
