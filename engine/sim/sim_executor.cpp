#include "engine/sim/sim_executor.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace sy {

SimExecutor::SimExecutor(const ModelConfig& config, SimExecutorOptions options, EventLoop& loop)
    : config_(config), options_(std::move(options)), loop_(loop) {
  assert(options_.cost_model && "the sim backend needs a cost model");
  assert(loop_.virtual_time() && "the sim backend runs on virtual time");
}

void SimExecutor::complete_after(std::int64_t duration, Completion done) {
  // A worker runs one execution at a time, so it starts now and one slot holds its completion:
  // the event is a plain call on `this` (the simulator runs hundreds of thousands of these
  // per second).
  assert(!pending_ && "a device runs one execution at a time");
  pending_ = done;
  pending_timing_ = ExecutionTiming{loop_.now(), loop_.now() + std::max<std::int64_t>(0, duration)};
  loop_.post_call(pending_timing_.end_ns, &SimExecutor::complete, this, 0);
}

void SimExecutor::complete(void* executor, std::uint64_t) {
  auto& self = *static_cast<SimExecutor*>(executor);
  const Completion done_now = std::exchange(self.pending_, Completion{});
  done_now(self.pending_timing_);
}

std::int64_t SimExecutor::expert_bytes() const {
  return 3 * static_cast<std::int64_t>(config_.hidden_size) * config_.moe_intermediate_size * 2;
}

void SimExecutor::fetch_expert(std::int32_t, std::int32_t, const Executor* source, Completion done) {
  const LinkModel& link = options_.link;
  const std::int64_t bytes = expert_bytes();
  double bytes_per_ns = options_.host_bytes_per_ns;
  std::int64_t latency = link.latency_ns;
  if (source) {
    const auto* sim = dynamic_cast<const SimExecutor*>(source);
    assert(sim && "a sim device copies from a sim device");
    const std::int32_t from = sim->options_.device;
    const bool same_node =
        link.devices_per_node <= 0 || from / link.devices_per_node == options_.device / link.devices_per_node;
    bytes_per_ns = same_node ? link.bytes_per_ns : link.inter_node_bytes_per_ns;
    latency = same_node ? link.latency_ns : link.inter_node_latency_ns;
  }
  const auto duration =
      latency + (bytes_per_ns > 0 ? static_cast<std::int64_t>(static_cast<double>(bytes) / bytes_per_ns) : 0);
  const ExecutionTiming timing{std::max(loop_.now(), copy_free_at_), std::max(loop_.now(), copy_free_at_) + duration};
  copy_free_at_ = timing.end_ns;
  loop_.post(timing.end_ns, [done, timing] { done(timing); });
}

void SimExecutor::on_policy(const RuntimePolicy& policy) {
  const bool collective = policy.kind == PolicyKind::Sync && policy.collective_barrier;
  collective_ns_ = collective ? options_.cost_model->collective_ns() : 0;
  host_ns_ = collective ? options_.cost_model->iteration_host_ns() : 0;
}

std::optional<MuQueueGate> SimExecutor::gate(LayerKind kind) const {
  std::int32_t block = 0;
  while (block < config_.num_layers && !config_.is_sparse(block)) ++block;
  if (block == config_.num_layers) return std::nullopt;
  const CostModel* cost = options_.cost_model;
  switch (kind) {
    case LayerKind::Expert:
      return MuQueueGate::from_cost([cost, block](std::int64_t rows) {
        const std::int64_t one[] = {rows};
        return cost->experts_ns(block, one);
      });
    case LayerKind::Attention:
      return MuQueueGate::from_cost(
          [cost, block](std::int64_t rows) { return cost->attention_ns(block, rows, rows * kGateContext); });
    case LayerKind::Sampler:
      return MuQueueGate::from_cost([cost](std::int64_t rows) { return cost->sample_ns(rows); });
  }
  return std::nullopt;
}

void SimExecutor::merge(std::vector<TokenPool::Completed>& merges, Completion done) {
  std::int64_t rows = 0;
  for (const TokenPool::Completed& m : merges) rows += m.rows;
  complete_after(options_.cost_model->merge_ns(rows), std::move(done));
}

void SimExecutor::attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext>, RoutedRows& routed,
                            Completion done) {
  const std::int64_t rows = batch.rows();
  std::int64_t context = 0;
  // Every row attends to the cached positions before it and itself.
  for (const TokenRow& row : batch.row) context += row.position + 1;
  std::int64_t duration = options_.cost_model->attention_ns(block, rows, context);
  routed.shared_pending = false;
  if (config_.is_sparse(block)) {
    if (routed.shared_apart && config_.has_shared_expert()) {
      routed.shared_pending = true;
      duration -= std::min(duration, options_.cost_model->shared_expert_ns(block, rows));
    }
    const std::int32_t K = config_.top_k;
    routed.expert_ids.resize(static_cast<std::size_t>(rows * K));
    routed.expert_weights.resize(static_cast<std::size_t>(rows * K));
    routed.ffn_in.reset();  // no activations on the sim backend
    routed.shared_out.reset();
    if (!options_.routing_trace) {
      // The skew model alone: the whole batch in one call.
      assert(options_.skew && "no routing for a token the trace lacks");
      options_.skew->route_rows(block, batch.row.data(), rows, K, routed.expert_ids.data(), routed.expert_weights.data());
    }
    if (options_.routing_trace) trace_lookups_ += rows;
    for (std::int64_t r = 0; options_.routing_trace && r < rows; ++r) {
      const TokenRow& row = batch.at(r);
      std::int32_t* ids = routed.expert_ids.data() + r * K;
      float* w = routed.expert_weights.data() + r * K;
      if (options_.routing_trace->lookup(block, row.request, row.position, ids)) {
        std::fill(w, w + K, 1.0f / static_cast<float>(K));
        continue;
      }
      ++trace_misses_;
      assert(options_.skew && "no routing for a token the trace lacks");
      options_.skew->route(block, row.request, row.position, K, ids, w);
    }
  }
  complete_after(duration + (config_.is_sparse(block) ? collective_ns_ : 0), std::move(done));
}

void SimExecutor::shared_expert(std::int32_t block, TokenBatch& batch, Completion done) {
  complete_after(options_.cost_model->shared_expert_ns(block, batch.rows()), std::move(done));
}

void SimExecutor::experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert, Completion done) {
  per_expert_.clear();
  for (const TokenBatch* b : per_expert) per_expert_.push_back(b->rows());
  complete_after(options_.cost_model->experts_ns(block, per_expert_) + collective_ns_, std::move(done));
}

void SimExecutor::sample(TokenBatch& batch, std::span<const SequenceContext>, std::vector<std::int32_t>& next,
                         std::vector<kernels::TokenLogprobs>& logprobs, std::vector<PromptLogprobs>& prompt_logprobs,
                         Completion done) {
  // No logits: a token id derived from the position keeps outputs deterministic; the sim has
  // no EOS, requests end at their max_new_tokens. No log-probabilities either, of sampled or
  // prompt tokens: both stay empty (the HTTP API refuses to promise prompt ones on the sim).
  next.clear();
  logprobs.clear();
  prompt_logprobs.clear();
  batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
    next.push_back((batch.at(first + rows - 1).position + 1) % std::max(1, config_.vocab_size));
  });
  complete_after(options_.cost_model->sample_ns(static_cast<std::int64_t>(next.size())) + host_ns_, std::move(done));
}

}  // namespace sy
