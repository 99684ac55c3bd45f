// The cpu backend's executor: one device's math on the host, through the same ModelOps the
// reference path uses. Work runs on the device's stream: at once on virtual time, or on a
// thread of the device's own on the wall clock. An attention rank keeps the storage of its
// paged KV cache here; which pages belong to whom comes with each execution. The device's
// activations live in host buffers of its own pool.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/sim/cost_model.h"
#include "engine/cpu/device_stream.h"
#include "engine/cpu/host_activation_ops.h"
#include "engine/forward/model_ops.h"
#include "engine/kv/paged_kv_cache.h"
#include "engine/runtime/executor.h"

namespace sy {

// Routing override (skew studies, sim): experts and weights of one token (a request's row at
// an absolute position), chosen by something other than the model's router. Called from the
// device's thread on the wall clock: it must be safe to call concurrently.
using RoutingOverride = std::function<void(std::int32_t block, std::int64_t request, std::int32_t position,
                                           std::int32_t k, std::int32_t* expert_ids, float* weights)>;

// Sees every routing decision (cpu runs with --record-routing): the experts of one token.
// Called from device threads on the wall clock, so it must be safe to call concurrently.
using RoutingRecorder = std::function<void(std::int32_t block, std::int64_t request, std::int32_t position,
                                           std::int32_t k, const std::int32_t* expert_ids)>;

struct CpuExecutorOptions {
  bool attention_rank = false;
  std::int32_t kv_pages = 0;
  std::int32_t page_size = 16;
  const CostModel* cost_model = nullptr;  // virtual time: null means executions take their measured time
  RoutingOverride routing;                // empty: the model's router
  RoutingRecorder record_routing;         // empty: nothing recorded
};

class CpuExecutor final : public Executor {
 public:
  CpuExecutor(std::shared_ptr<const ModelWeights> weights, CpuExecutorOptions options,
              std::unique_ptr<DeviceStream> stream);

  void attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences, RoutedRows& routed,
                 Completion done) override;
  void experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert, Completion done) override;
  void shared_expert(std::int32_t block, TokenBatch& batch, Completion done) override;
  void sample(TokenBatch& batch, std::span<const SequenceContext> sequences, std::vector<std::int32_t>& next,
              std::vector<kernels::TokenLogprobs>& logprobs, std::vector<PromptLogprobs>& prompt_logprobs,
              Completion done) override;
  void merge(std::vector<TokenPool::Completed>& merges, Completion done) override;
  void finish() override { stream_->finish(); }

  bool owns_expert_weights() const override { return true; }
  std::int64_t expert_bytes() const override;
  std::int64_t kv_storage_bytes() const override;
  void load_expert(std::int32_t block, std::int32_t expert) override;
  // A memcpy of the source device's copy (or the checkpoint's) into memory this device owns,
  // on the device's thread, in order with its executions; it lasts what the memcpy took.
  void fetch_expert(std::int32_t block, std::int32_t expert, const Executor* source, Completion done) override;
  void drop_expert(std::int32_t block, std::int32_t expert) override;

 private:
  // One expert's weights as this device holds them: views of the checkpoint's mapped pages
  // (loaded from the host: read-only, shared like the page cache), or of `storage`, a copy the
  // device owns. Immutable once made; shared so that a copy being read survives its drop.
  struct ExpertCopy {
    FfnWeights weights;
    std::vector<std::byte> storage;
  };
  std::shared_ptr<const ExpertCopy> expert_copy(std::int32_t block, std::int32_t expert) const;
  std::shared_ptr<const ExpertCopy> host_copy(std::int32_t block, std::int32_t expert) const;

  // Each runs on the device's stream and returns the duration to charge on virtual time.
  std::int64_t run_attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences,
                             RoutedRows& routed);
  std::int64_t run_experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert);
  std::int64_t run_shared_expert(std::int32_t block, TokenBatch& batch);
  std::int64_t run_sample(TokenBatch& batch, std::span<const SequenceContext> sequences, std::vector<std::int32_t>& next,
                          std::vector<kernels::TokenLogprobs>& logprobs, std::vector<PromptLogprobs>& prompt_logprobs);
  // The prompt tokens that the request's rows [first, first + rows) of `batch` score
  // (Executor::sample); returns the rows scored.
  std::int64_t score_prompt(const TokenBatch& batch, std::int64_t first, std::int64_t rows, const SequenceContext& s,
                            std::vector<PromptLogprobs>& out);
  std::int64_t run_merge(std::vector<TokenPool::Completed>& merges);
  std::int64_t elapsed_since(std::int64_t start_ns) const;

  ModelOps ops_;
  CpuExecutorOptions options_;
  std::unique_ptr<PagedKvCache> cache_;
  // Scratch of the device's thread.
  Workspace ws_;
  BatchLayout batch_;
  std::vector<std::int32_t> tokens_;  // block 0: the rows' token ids, as the embedding reads them
  std::vector<float> scales_;         // an expert's rows' router weights, as the expert reads them
  std::vector<float> logits_;
  std::vector<float> penalized_;  // one row of logits_ under its request's penalties
  std::vector<float> masked_;     // one row of logits_ under its request's guided-decoding mask
  // Before the stream: storage handed out here may be in use on its thread until it stops.
  HostActivationOps activations_;
  // The experts this device holds: read on its thread, changed on the loop's (load, drop) and
  // its own (a copy arriving).
  mutable std::mutex experts_mutex_;
  std::map<std::pair<std::int32_t, std::int32_t>, std::shared_ptr<const ExpertCopy>> experts_;
  // Last: destroyed first, so its thread has finished before the state above goes.
  std::unique_ptr<DeviceStream> stream_;
};

}  // namespace sy
