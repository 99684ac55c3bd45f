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

std::int64_t SimExecutor::attention(std::int32_t block, const std::vector<TokenPacket*>& packets,
                                    std::vector<RoutedRows>& routed) {
  std::int64_t rows = 0, context = 0;
  for (const TokenPacket* p : packets) {
    rows += p->rows;
    // Every row attends to the cached positions before it and itself.
    context += static_cast<std::int64_t>(p->rows) * p->start_pos + static_cast<std::int64_t>(p->rows) * (p->rows + 1) / 2;
  }
  if (config_.is_sparse(block)) {
    const std::int32_t K = config_.top_k;
    for (std::size_t i = 0; i < packets.size(); ++i) {
      const TokenPacket& p = *packets[i];
      RoutedRows& out = routed[i];
      out.expert_ids.resize(static_cast<std::size_t>(p.rows * K));
      out.expert_weights.assign(static_cast<std::size_t>(p.rows * K), 1.0f / static_cast<float>(K));
      out.ffn_in.clear();
      out.shared_out.clear();
      for (std::int32_t r = 0; r < p.rows; ++r) {
        std::int32_t* ids = out.expert_ids.data() + r * K;
        float* w = out.expert_weights.data() + r * K;
        if (options_.routing_trace && options_.routing_trace->lookup(block, p.request, p.start_pos + r, ids)) continue;
        if (options_.routing_trace) ++trace_misses_;
        assert(options_.routing && "no routing for a token the trace lacks");
        options_.routing(block, p.request, p.start_pos + r, K, ids, w);
      }
    }
  }
  return options_.cost_model->attention_ns(block, rows, context);
}

std::int64_t SimExecutor::experts(std::int32_t block, const std::vector<ExpertBatch>& batches) {
  per_expert_.clear();
  for (const ExpertBatch& b : batches) {
    std::int64_t n = 0;
    for (const TokenPacket* p : b.packets) n += p->rows;
    per_expert_.push_back(n);
  }
  return options_.cost_model->experts_ns(block, per_expert_);
}

std::int64_t SimExecutor::sample(const std::vector<TokenPacket*>& packets, std::vector<std::int32_t>& next) {
  // No logits: a token id derived from the position keeps outputs deterministic; the sim has
  // no EOS, requests end at their max_new_tokens.
  next.resize(packets.size());
  for (std::size_t i = 0; i < packets.size(); ++i) {
    const TokenPacket& p = *packets[i];
    next[i] = (p.start_pos + p.rows) % std::max(1, config_.vocab_size);
  }
  return options_.cost_model->sample_ns(static_cast<std::int64_t>(packets.size()));
}

}  // namespace sy
