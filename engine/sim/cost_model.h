// How long an execution takes when it is modelled rather than measured: the sim backend's
// clock, and the cpu backend's when a run must be timing-deterministic (tests).
#pragma once

#include <cstdint>
#include <span>

namespace sy {

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Attention half of `block` (with its router, shared expert, or dense MLP) over `tokens` rows
  // whose sequences hold `context` cached positions in total.
  virtual std::int64_t attention_ns(std::int32_t block, std::int64_t tokens, std::int64_t context) const = 0;
  // One grouped expert execution of `block`: tokens_per_expert[i] rows for the i-th expert run.
  virtual std::int64_t experts_ns(std::int32_t block, std::span<const std::int64_t> tokens_per_expert) const = 0;
  // The part of attention_ns that is the shared expert of `block` over `tokens` rows (0 without
  // one): charged on its own when the shared expert runs as a separate execution (findep).
  virtual std::int64_t shared_expert_ns(std::int32_t /*block*/, std::int64_t /*tokens*/) const { return 0; }
  // Final norm, lm_head and sampling of `tokens` rows.
  virtual std::int64_t sample_ns(std::int64_t tokens) const = 0;
  // The token pool's merge of `rows` rows (K expert outputs each into the residual). Only
  // runs where activations travel (cpu, cuda); the sim backend has none to merge.
  virtual std::int64_t merge_ns(std::int64_t /*rows*/) const { return 0; }
  // A synchronous engine's costs outside the kernels (RuntimePolicy::collective_barrier): the
  // latency of one all-to-all collective over the deployment's devices (the bytes travel on
  // the links, priced by the transport), and the host's scheduling of one iteration, during
  // which an attention rank's device waits.
  virtual std::int64_t collective_ns() const { return 0; }
  virtual std::int64_t iteration_host_ns() const { return 0; }
};

// Fixed launch cost plus a per-token cost: enough to give executions a shape in tests.
class LinearCostModel final : public CostModel {
 public:
  LinearCostModel(std::int64_t fixed_ns, std::int64_t per_token_ns) : fixed_(fixed_ns), per_token_(per_token_ns) {}
  std::int64_t attention_ns(std::int32_t, std::int64_t tokens, std::int64_t context) const override {
    return fixed_ + per_token_ * tokens + context;
  }
  std::int64_t experts_ns(std::int32_t, std::span<const std::int64_t> tokens_per_expert) const override {
    std::int64_t t = 0;
    for (std::int64_t n : tokens_per_expert) t += fixed_ + per_token_ * n;
    return t;
  }
  std::int64_t sample_ns(std::int64_t tokens) const override { return fixed_ + per_token_ * tokens; }
  // Half of attention's per-token cost, so that a separate shared expert takes time of its own.
  std::int64_t shared_expert_ns(std::int32_t, std::int64_t tokens) const override { return per_token_ * tokens / 2; }
  std::int64_t merge_ns(std::int64_t rows) const override { return per_token_ * rows; }

 private:
  std::int64_t fixed_, per_token_;
};

}  // namespace sy
