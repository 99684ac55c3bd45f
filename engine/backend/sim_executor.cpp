#include "engine/backend/sim_executor.h"

#include <algorithm>
#include <cassert>

namespace sy {

SimExecutor::SimExecutor(const ModelConfig& config, SimExecutorOptions options)
    : config_(config), options_(std::move(options)) {
  assert(options_.cost_model && "the sim backend needs a cost model");
  if (options_.attention_rank) free_pages_ = options_.kv_pages;
}

bool SimExecutor::admit(std::int64_t request, std::int32_t positions, kernels::SamplingParams, std::uint64_t) {
  const std::int32_t need = kv_pages_for(positions);
  if (need > free_pages_) return false;
  free_pages_ -= need;
  pages_[request] = need;
  return true;
}

void SimExecutor::release(std::int64_t request) {
  const auto it = pages_.find(request);
  if (it == pages_.end()) return;
  free_pages_ += it->second;
  pages_.erase(it);
}

std::int64_t SimExecutor::attention(std::int32_t block, TokenBatch& batch, RoutedRows& routed) {
  const std::int64_t rows = batch.rows();
  std::int64_t context = 0;
  // Every row attends to the cached positions before it and itself.
  for (std::int32_t position : batch.position) context += position + 1;
  if (config_.is_sparse(block)) {
    const std::int32_t K = config_.top_k;
    routed.expert_ids.resize(static_cast<std::size_t>(rows * K));
    routed.expert_weights.resize(static_cast<std::size_t>(rows * K));
    routed.ffn_in.clear();
    routed.shared_out.clear();
    for (std::int64_t r = 0; r < rows; ++r) {
      const auto i = static_cast<std::size_t>(r);
      std::int32_t* ids = routed.expert_ids.data() + r * K;
      float* w = routed.expert_weights.data() + r * K;
      if (options_.routing_trace) {
        if (options_.routing_trace->lookup(block, batch.request[i], batch.position[i], ids)) {
          std::fill(w, w + K, 1.0f / static_cast<float>(K));
          continue;
        }
        ++trace_misses_;
      }
      assert(options_.routing && "no routing for a token the trace lacks");
      options_.routing(block, batch.request[i], batch.position[i], K, ids, w);
    }
  }
  return options_.cost_model->attention_ns(block, rows, context);
}

std::int64_t SimExecutor::experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert) {
  per_expert_.clear();
  for (const TokenBatch* b : per_expert) per_expert_.push_back(b->rows());
  return options_.cost_model->experts_ns(block, per_expert_);
}

std::int64_t SimExecutor::sample(TokenBatch& batch, std::vector<std::int32_t>& next) {
  // No logits: a token id derived from the position keeps outputs deterministic; the sim has
  // no EOS, requests end at their max_new_tokens.
  next.clear();
  batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
    next.push_back((batch.position[static_cast<std::size_t>(first + rows - 1)] + 1) % std::max(1, config_.vocab_size));
  });
  return options_.cost_model->sample_ns(static_cast<std::int64_t>(next.size()));
}

}  // namespace sy
