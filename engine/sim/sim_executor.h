// The sim backend's executor: no math. An execution lasts what the cost model says on virtual
// time, and routing comes from the skew model or a recorded trace. KV capacity is the KV block
// manager's, as on every backend.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sim/cost_model.h"
#include "engine/cpu/cpu_executor.h"
#include "engine/sim/routing_trace.h"
#include "engine/sim/skew_router.h"
#include "engine/model/model_config.h"
#include "engine/runtime/executor.h"
#include "engine/runtime/loop_transport.h"

namespace sy {

struct SimExecutorOptions {
  const CostModel* cost_model = nullptr;         // required
  std::shared_ptr<const SkewRouting> skew;       // required unless a trace covers every token
  const RoutingTrace* routing_trace = nullptr;   // recorded routing, looked up first
  // Weight copies: this device's index, the links between devices (the deployment's), the
  // host link's bandwidth in bytes/ns (PCIe; 0: infinite) and the KV storage it accounts.
  std::int32_t device = 0;
  LinkModel link;
  double host_bytes_per_ns = 0;
  std::int64_t kv_bytes = 0;
};

class SimExecutor final : public Executor {
 public:
  // Completes on `loop`, which must run on virtual time.
  SimExecutor(const ModelConfig& config, SimExecutorOptions options, EventLoop& loop);

  void attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences, RoutedRows& routed,
                 Completion done) override;
  void experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert, Completion done) override;
  void shared_expert(std::int32_t block, TokenBatch& batch, Completion done) override;
  void sample(TokenBatch& batch, std::span<const SequenceContext> sequences, std::vector<std::int32_t>& next,
              std::vector<kernels::TokenLogprobs>& logprobs, std::vector<PromptLogprobs>& prompt_logprobs,
              Completion done) override;
  void merge(std::vector<TokenPool::Completed>& merges, Completion done) override;
  bool reads_sequences() const override { return false; }
  // Sync with a collective barrier: every sparse block's attention execution ends in the
  // dispatch all-to-all and every expert execution in the combine all-to-all (each device takes
  // part, its stream held for the collective's latency), and every sampling (the end of an
  // iteration on its rank) waits for the host's scheduling of the next.
  void on_policy(const RuntimePolicy& policy) override;
  // Experts: one expert's curve (every routed expert has the same shape). Attention: the first
  // sparse block's, each row with kGateContext cached positions. Sampler: lm_head's.
  std::optional<MuQueueGate> gate(LayerKind kind) const override;
  static constexpr std::int64_t kGateContext = 1024;

  // bf16 weights, as the roofline assumes.
  bool owns_expert_weights() const override { return true; }
  std::int64_t expert_bytes() const override;
  std::int64_t kv_storage_bytes() const override { return options_.kv_bytes; }
  void load_expert(std::int32_t, std::int32_t) override {}
  // Takes α + bytes/β of the link from the source (the host: PCIe) on virtual time, beside the
  // device's executions (a copy engine); a device's copies run one after another.
  void fetch_expert(std::int32_t block, std::int32_t expert, const Executor* source, Completion done) override;
  void drop_expert(std::int32_t, std::int32_t) override {}

  // Tokens looked up in the trace (each once per MoE block it reached), and those the trace
  // lacked (they fell back to the skew model).
  std::int64_t trace_lookups() const { return trace_lookups_; }
  std::int64_t trace_misses() const { return trace_misses_; }

 private:
  ModelConfig config_;
  SimExecutorOptions options_;
  // Completes `done` after `duration` on virtual time (one event, as cheap as the sim needs).
  void complete_after(std::int64_t duration, Completion done);
  static void complete(void* executor, std::uint64_t);
  EventLoop& loop_;
  Completion pending_;  // the execution in progress
  ExecutionTiming pending_timing_;
  std::vector<std::int64_t> per_expert_;
  std::int64_t trace_lookups_ = 0;
  std::int64_t trace_misses_ = 0;
  std::int64_t copy_free_at_ = 0;  // when this device's copy engine is free
  std::int64_t collective_ns_ = 0;  // per sparse attention and expert execution (sync, collective)
  std::int64_t host_ns_ = 0;        // per sampling (sync, collective)
};

}  // namespace sy
