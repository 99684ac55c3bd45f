#include "engine/backend/cpu_executor.h"

#include <algorithm>
#include <cassert>
#include <chrono>

#include "kernels/cpu/sampling.h"

namespace sy {
namespace {

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CpuExecutor::CpuExecutor(std::shared_ptr<const ModelWeights> weights, CpuExecutorOptions options,
                         std::unique_ptr<DeviceStream> stream)
    : ops_(weights), options_(std::move(options)), stream_(std::move(stream)) {
  if (options_.attention_rank) {
    cache_ = std::make_unique<PagedKvCache>(weights->config(), options_.kv_pages, options_.page_size);
  }
}

std::int64_t CpuExecutor::elapsed_since(std::int64_t start_ns) const { return std::max<std::int64_t>(1, wall_ns() - start_ns); }

// The arguments are the worker's and stay untouched until `done`; only the pointer vector of
// experts() is the caller's temporary, so it is copied.
void CpuExecutor::attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences,
                            RoutedRows& routed, Completion done) {
  stream_->submit([this, block, &batch, sequences, &routed] { return run_attention(block, batch, sequences, routed); },
                  std::move(done));
}

void CpuExecutor::experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert, Completion done) {
  stream_->submit([this, block, per_expert] { return run_experts(block, per_expert); }, std::move(done));
}

void CpuExecutor::sample(TokenBatch& batch, std::span<const SequenceContext> sequences, std::vector<std::int32_t>& next,
                         Completion done) {
  stream_->submit([this, &batch, sequences, &next] { return run_sample(batch, sequences, next); }, std::move(done));
}

void CpuExecutor::merge(std::vector<TokenPool::Completed>& merges, Completion done) {
  stream_->submit([this, &merges] { return run_merge(merges); }, std::move(done));
}

std::int64_t CpuExecutor::run_attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences,
                                        RoutedRows& routed) {
  const std::int64_t t0 = wall_ns();
  const ModelConfig& c = ops_.config();
  const std::int64_t H = c.hidden_size;
  const std::int64_t n = batch.rows();
  batch_.clear();
  std::int64_t context = 0;
  std::size_t seq = 0;
  batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
    const auto f = static_cast<std::size_t>(first);
    assert(sequences[seq].request == batch.request[f]);
    batch_.add_sequence(static_cast<std::int32_t>(rows), batch.position[f], sequences[seq++].block_table);
    context += batch.position[f] + rows;
  });
  if (block == 0) {
    hidden_.resize(static_cast<std::size_t>(n * H));
    ops_.embed(batch.token.data(), n, hidden_.data());
  } else {
    hidden_.assign(batch.hidden.begin(), batch.hidden.end());
  }
  ops_.attention(block, batch_, *cache_, hidden_.data(), ws_);

  if (!c.is_sparse(block)) {
    ops_.ffn(block, hidden_.data(), n, ws_);
  } else {
    const std::int32_t K = c.top_k;
    routed.ffn_in.resize(static_cast<std::size_t>(n * H));
    routed.expert_ids.resize(static_cast<std::size_t>(n * K));
    routed.expert_weights.resize(static_cast<std::size_t>(n * K));
    ops_.ffn_input(block, hidden_.data(), n, routed.ffn_in.data());
    if (options_.routing) {
      for (std::int64_t row = 0; row < n; ++row) {
        const auto r = static_cast<std::size_t>(row);
        options_.routing(block, batch.request[r], batch.position[r], K, routed.expert_ids.data() + row * K,
                         routed.expert_weights.data() + row * K);
      }
    } else {
      ops_.route(block, routed.ffn_in.data(), n, routed.expert_ids.data(), routed.expert_weights.data(), ws_);
    }
    if (options_.record_routing) {
      for (std::int64_t row = 0; row < n; ++row) {
        const auto r = static_cast<std::size_t>(row);
        options_.record_routing(block, batch.request[r], batch.position[r], K, routed.expert_ids.data() + row * K);
      }
    }
    routed.shared_out.clear();
    if (!ops_.weights().layer(block).shared_expert.empty()) {
      routed.shared_out.resize(static_cast<std::size_t>(n * H));
      ops_.shared_expert(block, routed.ffn_in.data(), n, routed.shared_out.data(), ws_);
    }
  }
  batch.hidden.swap(hidden_);
  return options_.cost_model ? options_.cost_model->attention_ns(block, n, context) : elapsed_since(t0);
}

std::int64_t CpuExecutor::run_experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert) {
  const std::int64_t t0 = wall_ns();
  const std::int64_t H = ops_.config().hidden_size;
  std::vector<std::int64_t> rows;
  rows.reserve(per_expert.size());
  for (TokenBatch* batch : per_expert) {
    // The batch is already one contiguous gather of every arrival for this expert.
    const std::int64_t m = batch->rows();
    y_.resize(static_cast<std::size_t>(m * H));
    ops_.expert(block, batch->layer.index, batch->hidden.data(), m, batch->weight.data(), y_.data(), ws_);
    batch->hidden.swap(y_);
    rows.push_back(m);
  }
  return options_.cost_model ? options_.cost_model->experts_ns(block, rows) : elapsed_since(t0);
}

std::int64_t CpuExecutor::run_sample(TokenBatch& batch, std::span<const SequenceContext> sequences,
                                    std::vector<std::int32_t>& next) {
  const std::int64_t t0 = wall_ns();
  const ModelConfig& c = ops_.config();
  // Only the last row of each request needs logits.
  std::vector<std::int32_t> last_rows;
  batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
    last_rows.push_back(static_cast<std::int32_t>(first + rows - 1));
  });
  assert(last_rows.size() == sequences.size());
  logits_.resize(last_rows.size() * static_cast<std::size_t>(c.vocab_size));
  ops_.logits(batch.hidden.data(), last_rows, logits_.data(), ws_);
  next.resize(last_rows.size());
  for (std::size_t i = 0; i < last_rows.size(); ++i) {
    // Drawn from (seed, position) alone, as the reference path does.
    const SamplingSpec& s = sequences[i].sampling;
    const std::int32_t position = batch.position[static_cast<std::size_t>(last_rows[i])];
    kernels::Sampler sampler({s.temperature, s.top_p, s.top_k}, kernels::position_seed(s.seed, position));
    next[i] = sampler.sample(logits_.data() + i * static_cast<std::size_t>(c.vocab_size), c.vocab_size);
  }
  return options_.cost_model ? options_.cost_model->sample_ns(static_cast<std::int64_t>(last_rows.size()))
                             : elapsed_since(t0);
}

std::int64_t CpuExecutor::run_merge(std::vector<TokenPool::Completed>& merges) {
  const std::int64_t t0 = wall_ns();
  const ModelConfig& c = ops_.config();
  std::int64_t rows = 0;
  for (TokenPool::Completed& m : merges) {
    ModelOps::combine(m.slot_outputs.data(), m.shared_out.empty() ? nullptr : m.shared_out.data(), m.rows, c.top_k,
                      c.hidden_size, m.hidden.data());
    rows += m.rows;
  }
  return options_.cost_model ? options_.cost_model->merge_ns(rows) : elapsed_since(t0);
}

}  // namespace sy
