#include "engine/cuda/cuda_executor.h"

#include <pthread.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/cuda/cuda_must.h"
#include "kernels/cpu/sampling.h"

namespace sy {
namespace {

using cuda_backend::must;

// Event times are float milliseconds: rebase well before their resolution gets coarse.
constexpr std::int64_t kRebaseNs = 60'000'000'000;

}  // namespace

DeviceScratch::~DeviceScratch() { cudaFree(p_); }

void* DeviceScratch::reserve(std::size_t bytes) {
  if (bytes <= bytes_) return p_;
  // The executor's thread waits for its stream after every execution, so nothing queued
  // still uses the old buffer (and cudaFree waits for the device anyway).
  must(cudaFree(p_), "cudaFree (scratch)");
  p_ = nullptr;
  const std::size_t grown = std::max(bytes, bytes_ + bytes_ / 2);
  must(cudaMalloc(&p_, grown), "cudaMalloc (scratch)");
  bytes_ = grown;
  return p_;
}

std::int64_t CudaExecutor::kv_bytes(const ModelConfig& c, std::int32_t kv_pages, std::int32_t page_size) {
  return 2 * static_cast<std::int64_t>(c.num_layers) * kv_pages * page_size * c.num_kv_heads * c.head_dim * 4;
}

CudaExecutor::CudaExecutor(std::shared_ptr<const DeviceModel> model, CudaExecutorOptions options, EventLoop& loop)
    : model_(std::move(model)), options_(options), loop_(loop), activations_(options.gpu) {
  must(cudaSetDevice(options_.gpu), "cudaSetDevice");
  must(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cuda backend: cublasCreate failed on gpu %d\n", options_.gpu);
    std::abort();
  }
  for (cudaEvent_t* e : {&base_, &start_, &end_}) must(cudaEventCreate(e), "cudaEventCreate");
  if (options_.attention_rank) {
    const ModelConfig& c = model_->config();
    kv_layer_floats_ = static_cast<std::int64_t>(options_.kv_pages) * options_.page_size * c.num_kv_heads * c.head_dim;
    const auto bytes = static_cast<std::size_t>(kv_layer_floats_ * c.num_layers) * sizeof(float);
    must(cudaMalloc(reinterpret_cast<void**>(&kv_k_), std::max<std::size_t>(bytes, 4)), "cudaMalloc (KV cache keys)");
    must(cudaMalloc(reinterpret_cast<void**>(&kv_v_), std::max<std::size_t>(bytes, 4)), "cudaMalloc (KV cache values)");
  }
  must(cudaEventRecord(base_, stream_), "cudaEventRecord");
  must(cudaEventSynchronize(base_), "cudaEventSynchronize");
  base_ns_ = loop_.now();
  thread_ = std::thread([this] { run_thread(); });
}

CudaExecutor::~CudaExecutor() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
  cudaSetDevice(options_.gpu);
  cudaStreamSynchronize(stream_);
  cudaFree(kv_k_);
  cudaFree(kv_v_);
  for (cudaEvent_t e : {base_, start_, end_}) cudaEventDestroy(e);
  cublasDestroy(cublas_);
  cudaStreamDestroy(stream_);
}

void CudaExecutor::submit(std::function<void()> work, Completion done) {
  loop_.begin_outside_work();  // the loop must not finish its run while this is on the GPU
  {
    std::lock_guard lock(mutex_);
    queue_.emplace_back(std::move(work), done);
  }
  cv_.notify_one();
}

void CudaExecutor::end_on_device() {
  if (ended_) return;
  must(cudaEventRecord(end_, stream_), "cudaEventRecord");
  must(cudaEventSynchronize(end_), "execution on the GPU");
  ended_ = true;
}

void CudaExecutor::run_thread() {
  const std::string name = "sy-cuda" + std::to_string(options_.device);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  must(cudaSetDevice(options_.gpu), "cudaSetDevice");
  for (;;) {
    std::pair<std::function<void()>, Completion> item;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    if (loop_.now() - base_ns_ > kRebaseNs) {
      must(cudaEventRecord(base_, stream_), "cudaEventRecord");
      must(cudaEventSynchronize(base_), "cudaEventSynchronize");
      base_ns_ = loop_.now();
    }
    ended_ = false;
    must(cudaEventRecord(start_, stream_), "cudaEventRecord");
    item.first();
    end_on_device();
    // The span is the GPU's: both ends from events on the stream, on the loop's time base.
    float start_ms = 0.0f, end_ms = 0.0f;
    must(cudaEventElapsedTime(&start_ms, base_, start_), "cudaEventElapsedTime");
    must(cudaEventElapsedTime(&end_ms, base_, end_), "cudaEventElapsedTime");
    ExecutionTiming timing;
    timing.start_ns = base_ns_ + static_cast<std::int64_t>(static_cast<double>(start_ms) * 1e6);
    timing.end_ns = base_ns_ + static_cast<std::int64_t>(static_cast<double>(end_ms) * 1e6);
    // base_ns_ was read just after base_ completed, so event times run a few µs late: never
    // report an end the loop has not reached yet.
    timing.end_ns = std::min(timing.end_ns, loop_.now());
    timing.start_ns = std::min(timing.start_ns, timing.end_ns - 1);
    loop_.post_external([loop = &loop_, done = item.second, timing] {
      loop->end_outside_work();
      done(timing);
    });
  }
}

// ---- the math, on the executor's thread ----

void CudaExecutor::linear(const float* x, std::int64_t n, const kernels::WeightView& w, const float* bias, float* y,
                          bool accumulate) {
  assert(!w.empty() && "a weight this GPU did not load");
  void* x_low = x_low_.get<float>(n * w.cols);  // 4 bytes per element: room for any type
  must(kernels::convert_from_f32_cuda(x, x_low, w.dtype, n * w.cols, stream_));
  must(kernels::linear_cuda(cublas_, x_low, w.dtype, n, w.data, w.rows, w.cols, bias, y, accumulate, stream_));
}

void CudaExecutor::ffn(const FfnWeights& w, const float* x, std::int64_t n, const float* row_scale, float* y) {
  assert(!w.empty() && "an FFN this GPU did not load");
  kernels::ExpertProblem p;
  p.x = x;
  p.y = y;
  p.row_scale = row_scale;
  p.gate = w.gate.data;
  p.up = w.up.data;
  p.down = w.down.data;
  p.m = n;
  must(kernels::swiglu_experts_cuda(cublas_, &p, 1, w.down.rows, w.gate.rows, w.gate.dtype, experts_ws_, stream_));
}

void CudaExecutor::rmsnorm(const float* x, const VectorView& w, std::int64_t rows, std::int64_t dim, float* y) {
  must(kernels::rmsnorm_cuda(x, w.data, w.dtype, model_->config().rms_norm_eps, rows, dim, y, stream_));
}

void CudaExecutor::attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences,
                             RoutedRows& routed, Completion done) {
  submit([this, block, &batch, sequences, &routed] { run_attention(block, batch, sequences, routed); }, done);
}

void CudaExecutor::experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert, Completion done) {
  submit([this, block, per_expert] { run_experts(block, per_expert); }, done);
}

void CudaExecutor::sample(TokenBatch& batch, std::span<const SequenceContext> sequences, std::vector<std::int32_t>& next,
                          std::vector<kernels::TokenLogprobs>& logprobs, Completion done) {
  submit([this, &batch, sequences, &next, &logprobs] { run_sample(batch, sequences, next, logprobs); }, done);
}

void CudaExecutor::shared_expert(std::int32_t block, TokenBatch& batch, Completion done) {
  submit([this, block, &batch] { run_shared_expert(block, batch); }, done);
}

void CudaExecutor::merge(std::vector<TokenPool::Completed>& merges, Completion done) {
  submit([this, &merges] { run_merge(merges); }, done);
}

void CudaExecutor::run_attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences,
                                 RoutedRows& routed) {
  const ModelConfig& c = model_->config();
  const LayerWeights& w = model_->layer(block);
  const std::int64_t H = c.hidden_size;
  const std::int64_t n = batch.rows();
  const std::int64_t q_width = static_cast<std::int64_t>(c.num_heads) * c.head_dim;
  const std::int64_t kv_width = static_cast<std::int64_t>(c.num_kv_heads) * c.head_dim;
  assert(options_.attention_rank);

  // Row metadata in one upload: [token_seq | positions | tokens | block tables].
  std::int32_t stride = 1;
  for (const SequenceContext& s : sequences) stride = std::max(stride, s.pages);
  const auto n_seqs = static_cast<std::int64_t>(sequences.size());
  host_meta_.assign(static_cast<std::size_t>(3 * n + n_seqs * stride), -1);
  std::int32_t* token_seq = host_meta_.data();
  std::int32_t* positions = token_seq + n;
  std::int32_t* tokens = positions + n;
  std::int32_t* tables = tokens + n;
  std::int32_t seq = 0;
  batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
    const SequenceContext& s = sequences[static_cast<std::size_t>(seq)];
    assert(s.request == batch.request[static_cast<std::size_t>(first)]);
    std::copy_n(s.block_table, s.pages, tables + static_cast<std::int64_t>(seq) * stride);
    for (std::int64_t r = first; r < first + rows; ++r) token_seq[r] = seq;
    ++seq;
  });
  std::copy_n(batch.position.data(), n, positions);
  if (block == 0) std::copy_n(batch.token.data(), n, tokens);
  std::int32_t* d_meta = meta_.get<std::int32_t>(static_cast<std::int64_t>(host_meta_.size()));
  must(cudaMemcpyAsync(d_meta, host_meta_.data(), host_meta_.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                       stream_),
       "cudaMemcpyAsync (attention metadata)");
  const std::int32_t* d_seq = d_meta;
  const std::int32_t* d_pos = d_meta + n;
  const std::int32_t* d_tokens = d_meta + 2 * n;
  const std::int32_t* d_tables = d_meta + 3 * n;

  if (block == 0) {
    batch.hidden = activations_.allocate(n, H);
    const kernels::WeightView& e = model_->embed_tokens();
    must(kernels::embedding_cuda(e.data, e.dtype, e.rows, e.cols, d_tokens, n, CudaActivationOps::data(batch.hidden),
                                 stream_));
  }
  assert(batch.hidden.rows() == n && batch.hidden.width() == H);
  float* hidden = CudaActivationOps::data(batch.hidden);

  // ModelOps::attention.
  float* normed = normed_.get<float>(n * H);
  float* q = q_.get<float>(n * q_width);
  float* k = k_.get<float>(n * kv_width);
  float* v = v_.get<float>(n * kv_width);
  float* attn = attn_.get<float>(n * q_width);
  rmsnorm(hidden, w.input_norm, n, H, normed);
  linear(normed, n, w.q_proj, w.q_bias, q);
  linear(normed, n, w.k_proj, w.k_bias, k);
  linear(normed, n, w.v_proj, w.v_bias, v);
  if (c.qk_norm) {
    rmsnorm(q, w.q_norm, n * c.num_heads, c.head_dim, q);
    rmsnorm(k, w.k_norm, n * c.num_kv_heads, c.head_dim, k);
  }
  must(kernels::rope_cuda(q, n, c.num_heads, c.head_dim, model_->inv_freq(), d_pos, stream_));
  must(kernels::rope_cuda(k, n, c.num_kv_heads, c.head_dim, model_->inv_freq(), d_pos, stream_));
  const kernels::KvLayerView view{kv_k_ + block * kv_layer_floats_, kv_v_ + block * kv_layer_floats_,
                                  options_.kv_pages, options_.page_size, c.num_kv_heads, c.head_dim};
  must(kernels::kv_cache_write_cuda(view, d_tables, stride, d_seq, d_pos, n, k, v, stream_));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  must(kernels::paged_attention_prefill_cuda(q, n, c.num_heads, d_seq, d_pos, view, d_tables, stride, scale, attn,
                                             stream_));
  linear(attn, n, w.o_proj, nullptr, hidden, /*accumulate=*/true);

  if (!c.is_sparse(block)) {
    // ModelOps::ffn of a dense block: hidden += mlp(post_attention_norm(hidden)).
    float* out = out_.get<float>(n * H);
    rmsnorm(hidden, w.post_attention_norm, n, H, normed);
    ffn(w.dense_mlp, normed, n, nullptr, out);
    must(kernels::combine_cuda(out, nullptr, n, 1, H, hidden, stream_));
    end_on_device();
    return;
  }
  const std::int32_t K = c.top_k;
  routed.ffn_in = activations_.allocate(n, H);
  float* ffn_in = CudaActivationOps::data(routed.ffn_in);
  rmsnorm(hidden, w.post_attention_norm, n, H, ffn_in);
  float* router_logits = out_.get<float>(n * c.num_experts);
  linear(ffn_in, n, w.router, nullptr, router_logits);
  std::int32_t* d_ids = ids_.get<std::int32_t>(n * K);
  float* d_weights = weights_.get<float>(n * K);
  must(kernels::router_topk_cuda(router_logits, n, c.num_experts, K, c.norm_topk_prob, d_ids, d_weights, stream_));
  routed.shared_out.reset();
  routed.shared_pending = false;
  if (!w.shared_expert.empty()) {
    if (routed.shared_apart) {
      routed.shared_pending = true;  // findep: run_shared_expert, an execution of its own
    } else {
      routed.shared_out = activations_.allocate(n, H);
      shared_ffn(w, ffn_in, n, CudaActivationOps::data(routed.shared_out));
    }
  }
  routed.expert_ids.resize(static_cast<std::size_t>(n * K));
  routed.expert_weights.resize(static_cast<std::size_t>(n * K));
  must(cudaMemcpyAsync(routed.expert_ids.data(), d_ids, routed.expert_ids.size() * sizeof(std::int32_t),
                       cudaMemcpyDeviceToHost, stream_),
       "cudaMemcpyAsync (expert ids)");
  must(cudaMemcpyAsync(routed.expert_weights.data(), d_weights, routed.expert_weights.size() * sizeof(float),
                       cudaMemcpyDeviceToHost, stream_),
       "cudaMemcpyAsync (expert weights)");
  end_on_device();
}

void CudaExecutor::shared_ffn(const LayerWeights& w, const float* x, std::int64_t n, float* out) {
  float* gate = gate_.get<float>(n);
  linear(x, n, w.shared_expert_gate, nullptr, gate);
  must(kernels::sigmoid_cuda(gate, n, stream_));
  ffn(w.shared_expert, x, n, gate, out);
}

void CudaExecutor::run_shared_expert(std::int32_t block, TokenBatch& batch) {
  const std::int64_t H = model_->config().hidden_size;
  const std::int64_t n = batch.rows();
  assert(batch.hidden.rows() == n && batch.hidden.width() == H);
  Activations out = activations_.allocate(n, H);
  if (n > 0) shared_ffn(model_->layer(block), CudaActivationOps::data(batch.hidden), n, CudaActivationOps::data(out));
  end_on_device();
  batch.hidden = std::move(out);  // the input goes back to the pool once the GPU is done with it
}

void CudaExecutor::run_experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert) {
  const ModelConfig& c = model_->config();
  const LayerWeights& w = model_->layer(block);
  const std::int64_t H = c.hidden_size;
  // The routing weights of every batch in one upload.
  std::vector<float> scales;
  for (const TokenBatch* b : per_expert) scales.insert(scales.end(), b->weight.begin(), b->weight.end());
  float* d_scales = scale_.get<float>(static_cast<std::int64_t>(scales.size()));
  must(cudaMemcpyAsync(d_scales, scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice, stream_),
       "cudaMemcpyAsync (routing weights)");
  std::vector<kernels::ExpertProblem> problems;
  std::vector<Activations> outputs;
  problems.reserve(per_expert.size());
  outputs.reserve(per_expert.size());
  std::int64_t offset = 0;
  kernels::DType type = model_->dtype();
  std::int64_t I = 0;
  for (TokenBatch* b : per_expert) {
    const FfnWeights& e = w.experts[static_cast<std::size_t>(b->layer.index)];
    assert(!e.empty() && "an expert this GPU did not load");
    const std::int64_t m = b->rows();
    outputs.push_back(activations_.allocate(m, H));
    kernels::ExpertProblem p;
    p.x = CudaActivationOps::data(b->hidden);
    p.y = CudaActivationOps::data(outputs.back());
    p.row_scale = d_scales + offset;
    p.gate = e.gate.data;
    p.up = e.up.data;
    p.down = e.down.data;
    p.m = m;
    problems.push_back(p);
    offset += m;
    type = e.gate.dtype;
    I = e.gate.rows;
  }
  if (!problems.empty())
    must(kernels::swiglu_experts_cuda(cublas_, problems.data(), static_cast<std::int64_t>(problems.size()), H, I, type,
                                      experts_ws_, stream_));
  end_on_device();
  // The inputs go back to their pools only now that the GPU is done with them.
  for (std::size_t i = 0; i < per_expert.size(); ++i) per_expert[i]->hidden = std::move(outputs[i]);
}

void CudaExecutor::run_sample(TokenBatch& batch, std::span<const SequenceContext> sequences,
                              std::vector<std::int32_t>& next, std::vector<kernels::TokenLogprobs>& logprobs) {
  const ModelConfig& c = model_->config();
  const std::int64_t H = c.hidden_size;
  const std::int32_t V = c.vocab_size;
  std::vector<std::int32_t> last_rows;
  batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
    last_rows.push_back(static_cast<std::int32_t>(first + rows - 1));
  });
  assert(last_rows.size() == sequences.size());
  const auto m = static_cast<std::int64_t>(last_rows.size());
  // Each row's draw from (seed, position) alone, as the cpu backend and the reference path.
  std::vector<kernels::DeviceSamplingParams> params(last_rows.size());
  bool any_logprobs = false;
  for (std::size_t i = 0; i < last_rows.size(); ++i) {
    const SamplingSpec& s = sequences[i].sampling;
    const std::int32_t position = batch.position[static_cast<std::size_t>(last_rows[i])];
    params[i] = {s.temperature, s.top_p, s.top_k,
                 kernels::sampling_uniform(kernels::position_seed(s.seed, position))};
    any_logprobs = any_logprobs || s.logprobs >= 0;
  }
  std::int32_t* d_rows = rows_.get<std::int32_t>(m);
  must(cudaMemcpyAsync(d_rows, last_rows.data(), last_rows.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                       stream_),
       "cudaMemcpyAsync (rows)");
  auto* d_params = params_.get<kernels::DeviceSamplingParams>(m);
  must(cudaMemcpyAsync(d_params, params.data(), params.size() * sizeof(kernels::DeviceSamplingParams),
                       cudaMemcpyHostToDevice, stream_),
       "cudaMemcpyAsync (sampling settings)");
  // ModelOps::logits: final norm of the gathered rows, then lm_head.
  float* x = normed_.get<float>(m * H);
  must(kernels::gather_rows_cuda(CudaActivationOps::data(batch.hidden), d_rows, m, H, x, stream_));
  rmsnorm(x, model_->final_norm(), m, H, x);
  float* logits = logits_.get<float>(m * V);
  linear(x, m, model_->lm_head(), nullptr, logits);
  std::int32_t* d_next = tokens_.get<std::int32_t>(m);
  must(kernels::sample_cuda(logits, m, V, d_params, d_next, stream_));
  next.resize(last_rows.size());
  must(cudaMemcpyAsync(next.data(), d_next, next.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream_),
       "cudaMemcpyAsync (next tokens)");
  if (any_logprobs) {
    host_logits_.resize(static_cast<std::size_t>(m * V));
    must(cudaMemcpyAsync(host_logits_.data(), logits, host_logits_.size() * sizeof(float), cudaMemcpyDeviceToHost,
                         stream_),
         "cudaMemcpyAsync (logits)");
  }
  end_on_device();
  logprobs.clear();
  if (!any_logprobs) return;
  logprobs.resize(last_rows.size());  // entries of requests that did not ask keep token -1
  for (std::size_t i = 0; i < last_rows.size(); ++i) {
    const SamplingSpec& s = sequences[i].sampling;
    if (s.logprobs >= 0)
      kernels::token_logprobs(host_logits_.data() + i * static_cast<std::size_t>(V), V, next[i], s.logprobs,
                              logprobs[i]);
  }
}

void CudaExecutor::run_merge(std::vector<TokenPool::Completed>& merges) {
  const ModelConfig& c = model_->config();
  for (TokenPool::Completed& m : merges)
    must(kernels::combine_cuda(CudaActivationOps::data(m.slot_outputs),
                               m.shared_out.null() ? nullptr : CudaActivationOps::data(m.shared_out), m.rows, c.top_k,
                               c.hidden_size, CudaActivationOps::data(m.hidden), stream_));
  end_on_device();
}

}  // namespace sy
