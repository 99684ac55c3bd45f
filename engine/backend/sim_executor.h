// The sim backend's executor: no math. An execution lasts what the cost model says, routing
// comes from the skew model or a recorded trace, and KV capacity is counted in pages.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/backend/cost_model.h"
#include "engine/backend/cpu_executor.h"
#include "engine/backend/routing_trace.h"
#include "engine/model/model_config.h"
#include "engine/runtime/executor.h"

namespace sy {

struct SimExecutorOptions {
  bool attention_rank = false;
  std::int32_t kv_pages = 0;
  std::int32_t page_size = 16;
  const CostModel* cost_model = nullptr;         // required
  RoutingOverride routing;                       // skew model; required unless a trace covers every token
  const RoutingTrace* routing_trace = nullptr;   // recorded routing, looked up first
};

class SimExecutor final : public Executor {
 public:
  SimExecutor(const ModelConfig& config, SimExecutorOptions options);

  std::int64_t attention(std::int32_t block, TokenBatch& batch, RoutedRows& routed) override;
  std::int64_t experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert) override;
  std::int64_t sample(TokenBatch& batch, std::vector<std::int32_t>& next) override;
  void merge(std::int32_t, std::vector<float>&, const std::vector<float>&, const std::vector<float>&) override {}

  bool admit(std::int64_t request, std::int32_t positions, kernels::SamplingParams sampling,
             std::uint64_t seed) override;
  void release(std::int64_t request) override;
  std::int32_t free_kv_pages() const override { return free_pages_; }
  std::int32_t kv_pages_for(std::int32_t positions) const override {
    return (positions + options_.page_size - 1) / options_.page_size;
  }

  // Tokens whose routing the trace lacked (they fell back to the skew model).
  std::int64_t trace_misses() const { return trace_misses_; }

 private:
  ModelConfig config_;
  SimExecutorOptions options_;
  std::int32_t free_pages_ = 0;
  std::unordered_map<std::int64_t, std::int32_t> pages_;  // request -> pages held
  std::vector<std::int64_t> per_expert_;
  std::int64_t trace_misses_ = 0;
};

}  // namespace sy
