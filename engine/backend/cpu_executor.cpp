#include "engine/backend/cpu_executor.h"

#include <algorithm>
#include <cassert>
#include <chrono>

namespace sy {
namespace {

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CpuExecutor::CpuExecutor(std::shared_ptr<const ModelWeights> weights, CpuExecutorOptions options)
    : ops_(weights), options_(std::move(options)) {
  if (options_.attention_rank) {
    cache_ = std::make_unique<PagedKvCache>(weights->config(), options_.kv_pages, options_.page_size);
  }
}

std::int64_t CpuExecutor::elapsed_since(std::int64_t start_ns) const { return std::max<std::int64_t>(1, wall_ns() - start_ns); }

bool CpuExecutor::admit(std::int64_t request, std::int32_t positions, kernels::SamplingParams sampling,
                        std::uint64_t seed) {
  assert(cache_ && "admit on a device without an attention rank");
  RequestState state{SequenceKv{}, kernels::Sampler(sampling, seed)};
  if (!state.kv.reserve(*cache_, positions)) return false;
  requests_.emplace(request, std::move(state));
  return true;
}

void CpuExecutor::release(std::int64_t request) {
  auto it = requests_.find(request);
  if (it == requests_.end()) return;
  it->second.kv.release(*cache_);
  requests_.erase(it);
}

std::int64_t CpuExecutor::attention(std::int32_t block, const std::vector<TokenPacket*>& packets,
                                    std::vector<RoutedRows>& routed) {
  const std::int64_t t0 = wall_ns();
  const ModelConfig& c = ops_.config();
  const std::int64_t H = c.hidden_size;
  batch_.clear();
  std::int64_t n = 0, context = 0;
  for (TokenPacket* p : packets) {
    const RequestState& state = requests_.at(p->request);
    batch_.add_sequence(p->rows, p->start_pos, state.kv.block_table());
    n += p->rows;
    context += p->start_pos + p->rows;
  }
  hidden_.resize(static_cast<std::size_t>(n * H));
  std::int64_t off = 0;
  for (TokenPacket* p : packets) {
    if (block == 0) {
      ops_.embed(p->tokens.data(), p->rows, hidden_.data() + off * H);
    } else {
      std::copy(p->hidden.begin(), p->hidden.end(), hidden_.begin() + off * H);
    }
    off += p->rows;
  }
  ops_.attention(block, batch_, *cache_, hidden_.data(), ws_);

  if (!c.is_sparse(block)) {
    ops_.ffn(block, hidden_.data(), n, ws_);
  } else {
    const std::int32_t K = c.top_k;
    ffn_in_.resize(static_cast<std::size_t>(n * H));
    ids_.resize(static_cast<std::size_t>(n * K));
    weights_.resize(static_cast<std::size_t>(n * K));
    ops_.ffn_input(block, hidden_.data(), n, ffn_in_.data());
    if (options_.routing) {
      std::int64_t row = 0;
      for (TokenPacket* p : packets)
        for (std::int32_t r = 0; r < p->rows; ++r, ++row)
          options_.routing(block, p->request, p->start_pos + r, K, ids_.data() + row * K,
                           weights_.data() + row * K);
    } else {
      ops_.route(block, ffn_in_.data(), n, ids_.data(), weights_.data(), ws_);
    }
    if (options_.record_routing) {
      std::int64_t row = 0;
      for (TokenPacket* p : packets)
        for (std::int32_t r = 0; r < p->rows; ++r, ++row)
          options_.record_routing(block, p->request, p->start_pos + r, K, ids_.data() + row * K);
    }
    const bool shared = !ops_.weights().layer(block).shared_expert.empty();
    if (shared) {
      shared_.resize(static_cast<std::size_t>(n * H));
      ops_.shared_expert(block, ffn_in_.data(), n, shared_.data(), ws_);
    }
    off = 0;
    for (std::size_t i = 0; i < packets.size(); ++i) {
      const std::int64_t rows = packets[i]->rows;
      RoutedRows& out = routed[i];
      out.expert_ids.assign(ids_.begin() + off * K, ids_.begin() + (off + rows) * K);
      out.expert_weights.assign(weights_.begin() + off * K, weights_.begin() + (off + rows) * K);
      out.ffn_in.assign(ffn_in_.begin() + off * H, ffn_in_.begin() + (off + rows) * H);
      if (shared) out.shared_out.assign(shared_.begin() + off * H, shared_.begin() + (off + rows) * H);
      off += rows;
    }
  }
  off = 0;
  for (TokenPacket* p : packets) {
    p->hidden.assign(hidden_.begin() + off * H, hidden_.begin() + (off + p->rows) * H);
    off += p->rows;
  }
  return options_.cost_model ? options_.cost_model->attention_ns(block, n, context) : elapsed_since(t0);
}

std::int64_t CpuExecutor::experts(std::int32_t block, const std::vector<ExpertBatch>& batches) {
  const std::int64_t t0 = wall_ns();
  const std::int64_t H = ops_.config().hidden_size;
  std::vector<std::int64_t> per_expert;
  per_expert.reserve(batches.size());
  for (const ExpertBatch& batch : batches) {
    // The executor's gather: many small arrivals become one contiguous batch per expert.
    std::int64_t m = 0;
    for (const TokenPacket* p : batch.packets) m += p->rows;
    x_.resize(static_cast<std::size_t>(m * H));
    y_.resize(static_cast<std::size_t>(m * H));
    scale_.resize(static_cast<std::size_t>(m));
    std::int64_t off = 0;
    for (const TokenPacket* p : batch.packets) {
      std::copy(p->hidden.begin(), p->hidden.end(), x_.begin() + off * H);
      std::copy(p->weights.begin(), p->weights.end(), scale_.begin() + off);
      off += p->rows;
    }
    ops_.expert(block, batch.expert, x_.data(), m, scale_.data(), y_.data(), ws_);
    off = 0;
    for (TokenPacket* p : batch.packets) {
      std::copy(y_.begin() + off * H, y_.begin() + (off + p->rows) * H, p->hidden.begin());
      off += p->rows;
    }
    per_expert.push_back(m);
  }
  return options_.cost_model ? options_.cost_model->experts_ns(block, per_expert) : elapsed_since(t0);
}

std::int64_t CpuExecutor::sample(const std::vector<TokenPacket*>& packets, std::vector<std::int32_t>& next) {
  const std::int64_t t0 = wall_ns();
  const ModelConfig& c = ops_.config();
  const std::int64_t H = c.hidden_size;
  // Only the last row of each packet needs logits: gather those rows.
  hidden_.resize(packets.size() * static_cast<std::size_t>(H));
  std::vector<std::int32_t> rows(packets.size());
  for (std::size_t i = 0; i < packets.size(); ++i) {
    const TokenPacket* p = packets[i];
    std::copy(p->hidden.end() - H, p->hidden.end(), hidden_.begin() + static_cast<std::ptrdiff_t>(i) * H);
    rows[i] = static_cast<std::int32_t>(i);
  }
  logits_.resize(packets.size() * static_cast<std::size_t>(c.vocab_size));
  ops_.logits(hidden_.data(), rows, logits_.data(), ws_);
  next.resize(packets.size());
  for (std::size_t i = 0; i < packets.size(); ++i) {
    next[i] = requests_.at(packets[i]->request)
                  .sampler.sample(logits_.data() + i * static_cast<std::size_t>(c.vocab_size), c.vocab_size);
  }
  return options_.cost_model ? options_.cost_model->sample_ns(static_cast<std::int64_t>(packets.size()))
                             : elapsed_since(t0);
}

void CpuExecutor::merge(TokenPacket& packet, const std::vector<float>& slot_outputs,
                        const std::vector<float>& shared_out) {
  const ModelConfig& c = ops_.config();
  ModelOps::combine(slot_outputs.data(), shared_out.empty() ? nullptr : shared_out.data(), packet.rows, c.top_k,
                    c.hidden_size, packet.hidden.data());
}

}  // namespace sy
