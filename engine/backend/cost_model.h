// How long an execution takes when it is modelled rather than measured: the sim backend's
// clock, and the cpu backend's when a run must be timing-deterministic (tests).
#pragma once

#include <cstdint>

namespace sy {

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Attention of `tokens` rows whose sequences hold `context` cached positions in total.
  virtual std::int64_t attention_ns(std::int64_t tokens, std::int64_t context) const = 0;
  // `experts` expert FFNs over `tokens` rows in total (one grouped execution).
  virtual std::int64_t experts_ns(std::int64_t tokens, std::int32_t experts) const = 0;
  virtual std::int64_t sample_ns(std::int64_t tokens) const = 0;
};

// Fixed launch cost plus a per-token cost: enough to give executions a shape in tests.
class LinearCostModel final : public CostModel {
 public:
  LinearCostModel(std::int64_t fixed_ns, std::int64_t per_token_ns) : fixed_(fixed_ns), per_token_(per_token_ns) {}
  std::int64_t attention_ns(std::int64_t tokens, std::int64_t context) const override {
    return fixed_ + per_token_ * tokens + context;
  }
  std::int64_t experts_ns(std::int64_t tokens, std::int32_t experts) const override {
    return fixed_ * experts + per_token_ * tokens;
  }
  std::int64_t sample_ns(std::int64_t tokens) const override { return fixed_ + per_token_ * tokens; }

 private:
  std::int64_t fixed_, per_token_;
};

}  // namespace sy
