#include "engine/cpu/cpu_executor.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>

#include "engine/runtime/prompt_scoring.h"
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

void CpuExecutor::shared_expert(std::int32_t block, TokenBatch& batch, Completion done) {
  stream_->submit([this, block, &batch] { return run_shared_expert(block, batch); }, std::move(done));
}

void CpuExecutor::sample(TokenBatch& batch, std::span<const SequenceContext> sequences, std::vector<std::int32_t>& next,
                         std::vector<kernels::TokenLogprobs>& logprobs, std::vector<PromptLogprobs>& prompt_logprobs,
                         Completion done) {
  stream_->submit([this, &batch, sequences, &next, &logprobs, &prompt_logprobs] {
    return run_sample(batch, sequences, next, logprobs, prompt_logprobs);
  },
                  std::move(done));
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
    const TokenRow& f = batch.at(first);
    assert(sequences[seq].request == f.request);
    batch_.add_sequence(static_cast<std::int32_t>(rows), f.position, sequences[seq++].block_table);
    context += f.position + rows;
  });
  if (block == 0) {
    batch.hidden = activations_.allocate(n, H);
    // The embedding reads the token ids as an array: gathered from the rows.
    tokens_.resize(static_cast<std::size_t>(n));
    for (std::int64_t r = 0; r < n; ++r) tokens_[static_cast<std::size_t>(r)] = batch.at(r).token;
    ops_.embed(tokens_.data(), n, HostActivationOps::data(batch.hidden));
  }
  assert(batch.hidden.rows() == n && batch.hidden.width() == H);
  float* hidden = HostActivationOps::data(batch.hidden);
  ops_.attention(block, batch_, *cache_, hidden, ws_);

  routed.shared_pending = false;
  std::int64_t shared_ns = 0;  // virtual time: charged by shared_expert() instead
  if (!c.is_sparse(block)) {
    ops_.ffn(block, hidden, n, ws_);
  } else {
    const std::int32_t K = c.top_k;
    routed.ffn_in = activations_.allocate(n, H);
    float* ffn_in = HostActivationOps::data(routed.ffn_in);
    routed.expert_ids.resize(static_cast<std::size_t>(n * K));
    routed.expert_weights.resize(static_cast<std::size_t>(n * K));
    ops_.ffn_input(block, hidden, n, ffn_in);
    if (options_.routing) {
      for (std::int64_t row = 0; row < n; ++row) {
        const TokenRow& r = batch.at(row);
        options_.routing(block, r.request, r.position, K, routed.expert_ids.data() + row * K,
                         routed.expert_weights.data() + row * K);
      }
    } else {
      ops_.route(block, ffn_in, n, routed.expert_ids.data(), routed.expert_weights.data(), ws_);
    }
    if (options_.record_routing) {
      for (std::int64_t row = 0; row < n; ++row) {
        const TokenRow& r = batch.at(row);
        options_.record_routing(block, r.request, r.position, K, routed.expert_ids.data() + row * K);
      }
    }
    routed.shared_out.reset();
    if (!ops_.weights().layer(block).shared_expert.empty()) {
      if (routed.shared_apart) {
        routed.shared_pending = true;
        if (options_.cost_model) shared_ns = options_.cost_model->shared_expert_ns(block, n);
      } else {
        routed.shared_out = activations_.allocate(n, H);
        ops_.shared_expert(block, ffn_in, n, HostActivationOps::data(routed.shared_out), ws_);
      }
    }
  }
  if (!options_.cost_model) return elapsed_since(t0);
  const std::int64_t modelled = options_.cost_model->attention_ns(block, n, context);
  return modelled - std::min(modelled, shared_ns);
}

std::int64_t CpuExecutor::run_shared_expert(std::int32_t block, TokenBatch& batch) {
  const std::int64_t t0 = wall_ns();
  const std::int64_t n = batch.rows();
  assert(batch.hidden.rows() == n && batch.hidden.width() == ops_.config().hidden_size);
  Activations out = activations_.allocate(n, ops_.config().hidden_size);
  ops_.shared_expert(block, HostActivationOps::data(batch.hidden), n, HostActivationOps::data(out), ws_);
  batch.hidden = std::move(out);  // the input goes back to the pool
  return options_.cost_model ? options_.cost_model->shared_expert_ns(block, n) : elapsed_since(t0);
}

std::int64_t CpuExecutor::run_experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert) {
  const std::int64_t t0 = wall_ns();
  const std::int64_t H = ops_.config().hidden_size;
  std::vector<std::int64_t> rows;
  rows.reserve(per_expert.size());
  for (TokenBatch* batch : per_expert) {
    // The batch is already one contiguous gather of every arrival for this expert.
    const std::int64_t m = batch->rows();
    Activations y = activations_.allocate(m, H);
    // Only this device's own copy: an expert it does not hold is a bug of the placement switch.
    const std::shared_ptr<const ExpertCopy> w = expert_copy(block, batch->layer.index);
    assert(w && "an expert this device does not hold");
    // The expert scales each row by its router weight, read as an array: gathered from the rows.
    scales_.resize(static_cast<std::size_t>(m));
    for (std::int64_t r = 0; r < m; ++r) scales_[static_cast<std::size_t>(r)] = batch->at(r).weight;
    ops_.expert(w->weights, HostActivationOps::data(batch->hidden), m, scales_.data(), HostActivationOps::data(y), ws_);
    // The input goes back to the pool of the device that gathered it.
    batch->hidden = std::move(y);
    rows.push_back(m);
  }
  return options_.cost_model ? options_.cost_model->experts_ns(block, rows) : elapsed_since(t0);
}

std::int64_t CpuExecutor::expert_bytes() const {
  const ModelConfig& c = ops_.config();
  for (std::int32_t b = 0; b < c.num_layers; ++b) {
    if (!c.is_sparse(b)) continue;
    const FfnWeights& w = ops_.weights().layer(b).experts.at(0);
    std::int64_t n = 0;
    for (const kernels::WeightView* v : {&w.gate, &w.up, &w.down})
      n += v->numel() * static_cast<std::int64_t>(kernels::dtype_size(v->dtype));
    return n;
  }
  return 0;
}

std::int64_t CpuExecutor::kv_storage_bytes() const {
  if (!options_.attention_rank) return 0;
  const ModelConfig& c = ops_.config();
  // K and V in float32 for every layer, as PagedKvCache allocates them.
  return static_cast<std::int64_t>(options_.kv_pages) * options_.page_size * c.num_layers * c.num_kv_heads * c.head_dim *
         2 * 4;
}

std::shared_ptr<const CpuExecutor::ExpertCopy> CpuExecutor::expert_copy(std::int32_t block, std::int32_t expert) const {
  std::lock_guard lock(experts_mutex_);
  const auto it = experts_.find({block, expert});
  return it == experts_.end() ? nullptr : it->second;
}

std::shared_ptr<const CpuExecutor::ExpertCopy> CpuExecutor::host_copy(std::int32_t block, std::int32_t expert) const {
  auto copy = std::make_shared<ExpertCopy>();
  copy->weights = ops_.weights().layer(block).experts.at(static_cast<std::size_t>(expert));
  return copy;
}

void CpuExecutor::load_expert(std::int32_t block, std::int32_t expert) {
  auto copy = host_copy(block, expert);
  std::lock_guard lock(experts_mutex_);
  experts_[{block, expert}] = std::move(copy);
}

void CpuExecutor::fetch_expert(std::int32_t block, std::int32_t expert, const Executor* source, Completion done) {
  std::shared_ptr<const ExpertCopy> from;
  if (source) {
    const auto* cpu = dynamic_cast<const CpuExecutor*>(source);
    assert(cpu && "a cpu device copies from a cpu device");
    from = cpu->expert_copy(block, expert);
    assert(from && "the source does not hold the expert");
  } else {
    from = host_copy(block, expert);
  }
  stream_->submit(
      [this, block, expert, from] {
        const std::int64_t t0 = wall_ns();
        auto copy = std::make_shared<ExpertCopy>();
        const kernels::WeightView* src[] = {&from->weights.gate, &from->weights.up, &from->weights.down};
        kernels::WeightView* dst[] = {&copy->weights.gate, &copy->weights.up, &copy->weights.down};
        std::size_t total = 0;
        for (const kernels::WeightView* v : src) total += static_cast<std::size_t>(v->numel()) * kernels::dtype_size(v->dtype);
        copy->storage.resize(total);
        std::size_t at = 0;
        for (int i = 0; i < 3; ++i) {
          const std::size_t n = static_cast<std::size_t>(src[i]->numel()) * kernels::dtype_size(src[i]->dtype);
          std::memcpy(copy->storage.data() + at, src[i]->data, n);
          *dst[i] = *src[i];
          dst[i]->data = copy->storage.data() + at;
          at += n;
        }
        {
          std::lock_guard lock(experts_mutex_);
          experts_[{block, expert}] = std::move(copy);
        }
        // Its real time, on either clock: the cost model has no term for a copy.
        return elapsed_since(t0);
      },
      std::move(done));
}

void CpuExecutor::drop_expert(std::int32_t block, std::int32_t expert) {
  std::lock_guard lock(experts_mutex_);
  experts_.erase({block, expert});
}

std::int64_t CpuExecutor::score_prompt(const TokenBatch& batch, std::int64_t first, std::int64_t rows,
                                      const SequenceContext& s, std::vector<PromptLogprobs>& out) {
  const std::int32_t vocab = ops_.config().vocab_size;
  return score_prompt_rows(batch, first, rows, s, vocab, out, [&](const std::vector<std::int32_t>& slice) {
    logits_.resize(slice.size() * static_cast<std::size_t>(vocab));
    ops_.logits(HostActivationOps::data(batch.hidden), slice, logits_.data(), ws_);
    return static_cast<const float*>(logits_.data());
  });
}

std::int64_t CpuExecutor::run_sample(TokenBatch& batch, std::span<const SequenceContext> sequences,
                                    std::vector<std::int32_t>& next, std::vector<kernels::TokenLogprobs>& logprobs,
                                    std::vector<PromptLogprobs>& prompt_logprobs) {
  const std::int64_t t0 = wall_ns();
  const ModelConfig& c = ops_.config();
  // Only the last row of each request needs logits.
  std::vector<std::int32_t> last_rows;
  batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
    last_rows.push_back(static_cast<std::int32_t>(first + rows - 1));
  });
  assert(last_rows.size() == sequences.size());
  logits_.resize(last_rows.size() * static_cast<std::size_t>(c.vocab_size));
  ops_.logits(HostActivationOps::data(batch.hidden), last_rows, logits_.data(), ws_);
  next.resize(last_rows.size());
  logprobs.clear();
  for (std::size_t i = 0; i < last_rows.size(); ++i) {
    // Drawn from (seed, position) alone, as the reference path does.
    const SamplingSpec& s = sequences[i].sampling;
    const std::int32_t position = batch.at(last_rows[i]).position;
    kernels::Sampler sampler({s.temperature, s.top_p, s.top_k, s.min_p}, kernels::position_seed(s.seed, position));
    const float* logits = logits_.data() + i * static_cast<std::size_t>(c.vocab_size);
    if (!sequences[i].allowed.empty()) {
      // Guided decoding, vLLM's order: the grammar's mask on the logits first, so the
      // log-probabilities are of the masked logits (disallowed tokens -inf), then the bias
      // and penalties on top.
      masked_.assign(logits, logits + c.vocab_size);
      kernels::apply_token_mask(masked_.data(), c.vocab_size, sequences[i].allowed);
      logits = masked_.data();
    }
    if (s.penalized() || !sequences[i].logit_bias.empty()) {
      // The bias and penalties change what is drawn, not the log-probabilities (of the raw
      // logits, as vLLM's).
      penalized_.assign(logits, logits + c.vocab_size);
      kernels::apply_logit_bias(penalized_.data(), c.vocab_size, sequences[i].logit_bias);
      kernels::apply_penalties(penalized_.data(), c.vocab_size,
                               kernels::penalty_terms(sequences[i].prompt, sequences[i].outputs, s.penalties()),
                               s.penalties());
      next[i] = sampler.sample(penalized_.data(), c.vocab_size);
    } else {
      next[i] = sampler.sample(logits, c.vocab_size);
    }
    if (s.logprobs >= 0) {
      logprobs.resize(last_rows.size());  // entries of requests that did not ask keep token -1
      kernels::token_logprobs(logits, c.vocab_size, next[i], s.logprobs, logprobs[i]);
    }
  }
  // After sampling, which is done with logits_: the prompt's rows reuse it.
  prompt_logprobs.clear();
  std::int64_t scored = 0;
  std::size_t request = 0;
  batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
    const SequenceContext& s = sequences[request++];
    if (s.sampling.prompt_logprobs >= 0) scored += score_prompt(batch, first, rows, s, prompt_logprobs);
  });
  return options_.cost_model ? options_.cost_model->sample_ns(static_cast<std::int64_t>(last_rows.size()) + scored)
                             : elapsed_since(t0);
}

std::int64_t CpuExecutor::run_merge(std::vector<TokenPool::Completed>& merges) {
  const std::int64_t t0 = wall_ns();
  const ModelConfig& c = ops_.config();
  std::int64_t rows = 0;
  for (TokenPool::Completed& m : merges) {
    ModelOps::combine(HostActivationOps::data(m.slot_outputs),
                      m.shared_out.null() ? nullptr : HostActivationOps::data(m.shared_out), m.rows, c.top_k,
                      c.hidden_size, HostActivationOps::data(m.hidden));
    rows += m.rows;
  }
  return options_.cost_model ? options_.cost_model->merge_ns(rows) : elapsed_since(t0);
}

}  // namespace sy
