// The cpu backend's executor: one virtual device's math on the host, through the same
// ModelOps the reference path uses. Each attention rank owns its paged KV cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/backend/cost_model.h"
#include "engine/forward/model_ops.h"
#include "engine/kv/paged_kv_cache.h"
#include "engine/runtime/executor.h"

namespace sy {

// Routing override (skew studies, sim): experts and weights of one token (a request's row at
// an absolute position), chosen by something other than the model's router.
using RoutingOverride = std::function<void(std::int32_t block, std::int64_t request, std::int32_t position,
                                           std::int32_t k, std::int32_t* expert_ids, float* weights)>;

// Sees every routing decision (cpu runs with --record-routing): the experts of one token.
using RoutingRecorder = std::function<void(std::int32_t block, std::int64_t request, std::int32_t position,
                                           std::int32_t k, const std::int32_t* expert_ids)>;

struct CpuExecutorOptions {
  bool attention_rank = false;
  std::int32_t kv_pages = 0;
  std::int32_t page_size = 16;
  const CostModel* cost_model = nullptr;  // null: durations are the measured wall time
  RoutingOverride routing;                // empty: the model's router
  RoutingRecorder record_routing;         // empty: nothing recorded
};

class CpuExecutor final : public Executor {
 public:
  CpuExecutor(std::shared_ptr<const ModelWeights> weights, CpuExecutorOptions options);

  std::int64_t attention(std::int32_t block, TokenBatch& batch, RoutedRows& routed) override;
  std::int64_t experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert) override;
  std::int64_t sample(TokenBatch& batch, std::vector<std::int32_t>& next) override;
  void merge(std::int32_t rows, std::vector<float>& hidden, const std::vector<float>& slot_outputs,
             const std::vector<float>& shared_out) override;

  bool admit(std::int64_t request, std::int32_t positions, kernels::SamplingParams sampling,
             std::uint64_t seed) override;
  void release(std::int64_t request) override;
  std::int32_t free_kv_pages() const override { return cache_ ? cache_->free_pages() : 0; }
  std::int32_t kv_pages_for(std::int32_t positions) const override {
    return cache_ ? cache_->pages_for(positions) : 0;
  }

 private:
  struct RequestState {
    SequenceKv kv;
    kernels::Sampler sampler;
  };
  std::int64_t elapsed_since(std::int64_t start_ns) const;

  ModelOps ops_;
  CpuExecutorOptions options_;
  std::unique_ptr<PagedKvCache> cache_;
  std::unordered_map<std::int64_t, RequestState> requests_;
  Workspace ws_;
  BatchLayout batch_;
  std::vector<float> hidden_, y_, logits_;
};

}  // namespace sy
