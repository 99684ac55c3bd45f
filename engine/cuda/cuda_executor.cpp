#include "engine/cuda/cuda_executor.h"

#include <pthread.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/cuda/cuda_must.h"
#include "kernels/cuda/device_sync_lock.h"
#include "kernels/cuda/grouped_small_m.h"
#include "kernels/cuda/kernel_preload.h"
#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/penalty_entries.h"
#include "engine/runtime/prompt_scoring.h"
#include "kernels/cpu/sampling.h"

namespace sy {
namespace {

using cuda_backend::must;

// Event times are float milliseconds: rebase well before their resolution gets coarse.
constexpr std::int64_t kRebaseNs = 60'000'000'000;

// The cuBLAS workspace every call of the executor uses, eager or captured: under stream
// capture cuBLAS must not allocate, and a graph keeps the workspace address it was captured
// with (cuBLAS docs, CUDA Graphs support and cublasSetWorkspace: 32 MiB suits Hopper). The
// same workspace eagerly keeps cuBLAS's choice of kernels, and so the bits, the same as in
// the graphs.
constexpr std::size_t kCublasWorkspaceBytes = 32ull << 20;

// Decode rows of requests longer than this many KV pages run eagerly: the decode buffers
// keep every bucket row's block table at this fixed stride.
constexpr std::int32_t kMaxGraphPages = 2048;

constexpr std::size_t kAlign = 256;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::int32_t graph_table_stride(std::int32_t kv_pages) { return std::max(1, std::min(kv_pages, kMaxGraphPages)); }

// Floats of the split (or grouped) attention kernel's partials for any decode bucket (the most
// rows whose blocks still leave it splitting need the most), whichever of the two runs.
std::int64_t decode_partial_floats(const ModelConfig& c) {
  std::int64_t most = 0;
  for (std::int32_t b = 1; b <= DecodeGraphs::kMaxBucket; b *= 2) {
    most = std::max(most, kernels::attention_split_floats(b, c.num_heads, c.head_dim));
    if (kernels::attention_gqa_supported(c.num_heads, c.num_kv_heads, c.head_dim))
      most = std::max(most, kernels::attention_gqa_floats(b, c.num_heads, c.num_kv_heads, c.head_dim));
  }
  return most;
}

// SY_CUDA_ATTENTION: "auto" (the default), "rows", "split" or "gqa"; anything else is named and ignored.
CudaExecutor::AttentionKernel attention_kernel_from_environment() {
  using K = CudaExecutor::AttentionKernel;
  const char* env = std::getenv("SY_CUDA_ATTENTION");
  const std::string_view v = env == nullptr ? "" : env;
  if (v.empty() || v == "auto") return K::Auto;
  if (v == "rows") return K::Rows;
  if (v == "split") return K::Split;
  if (v == "gqa") return K::Gqa;
  std::fprintf(stderr, "cuda backend: SY_CUDA_ATTENTION=%s is none of 'auto', 'rows', 'split' and 'gqa'; using auto\n",
               env);
  return K::Auto;
}

}  // namespace

DeviceScratch::~DeviceScratch() { kernels::locked_free(p_); }

void* DeviceScratch::reserve(std::size_t bytes) {
  if (bytes <= bytes_) return p_;
  // The executor's thread waits for its stream after every execution, so nothing queued
  // still uses the old buffer (and cudaFree waits for the device anyway).
  must(kernels::locked_free(p_), "cudaFree (scratch)");
  p_ = nullptr;
  const std::size_t grown = std::max(bytes, bytes_ + bytes_ / 2);
  must(kernels::locked_malloc(&p_, grown), "cudaMalloc (scratch)");
  bytes_ = grown;
  return p_;
}

// One page per layer beyond kv_pages: where padded decode rows write and read their keys
// (the KV block manager never hands it out).
std::int64_t CudaExecutor::kv_bytes(const ModelConfig& c, std::int32_t kv_pages, std::int32_t page_size) {
  return 2 * static_cast<std::int64_t>(c.num_layers) * (kv_pages + 1) * page_size * c.num_kv_heads * c.head_dim * 4;
}

std::int64_t CudaExecutor::kv_storage_bytes() const {
  return options_.attention_rank ? kv_bytes(model_->config(), options_.kv_pages, options_.page_size) : 0;
}

// As the cpu executor counts it: gate, up and down of the first sparse block's expert 0 (every
// routed expert has the same shape), at the type the GPU holds them in.
std::int64_t CudaExecutor::expert_bytes() const {
  const ModelConfig& c = model_->config();
  for (std::int32_t b = 0; b < c.num_layers; ++b) {
    if (!c.is_sparse(b)) continue;
    const std::vector<FfnWeights>& experts = model_->layer(b).experts;
    if (experts.empty() || experts.front().empty()) return 0;  // a GPU that holds no expert
    std::int64_t n = 0;
    for (const kernels::WeightView* v : {&experts.front().gate, &experts.front().up, &experts.front().down})
      n += v->numel() * static_cast<std::int64_t>(kernels::dtype_size(v->dtype));
    return n;
  }
  return 0;
}

CudaExecutor::Widths CudaExecutor::widths() const {
  const ModelConfig& c = model_->config();
  Widths w{};
  w.hidden = c.hidden_size;
  w.q = static_cast<std::int64_t>(c.num_heads) * c.head_dim;
  w.kv = static_cast<std::int64_t>(c.num_kv_heads) * c.head_dim;
  w.out = std::max<std::int64_t>(c.hidden_size, c.num_experts);
  w.ffn = std::max<std::int64_t>({1, c.intermediate_size, c.shared_expert_intermediate_size});
  w.x_low = std::max({w.hidden, w.q, w.ffn});
  return w;
}

// Must match ensure_decode_buffers' carving.
std::int64_t CudaExecutor::fixed_bytes(const ModelConfig& c, bool attention_rank, std::int32_t kv_pages) {
  std::int64_t bytes = static_cast<std::int64_t>(kCublasWorkspaceBytes);
  if (!attention_rank) return bytes;
  const std::int64_t H = c.hidden_size, q = static_cast<std::int64_t>(c.num_heads) * c.head_dim;
  const std::int64_t kv = static_cast<std::int64_t>(c.num_kv_heads) * c.head_dim;
  const std::int64_t out = std::max<std::int64_t>(H, c.num_experts);
  const std::int64_t ffn = std::max<std::int64_t>({1, c.intermediate_size, c.shared_expert_intermediate_size});
  const std::int64_t floats_per_row = 4 * H + 2 * q + 2 * kv + out + 1 + 2 * ffn + std::max({H, q, ffn}) + 2 * c.top_k;
  const std::int64_t ints_per_row = 3 + graph_table_stride(kv_pages);
  return bytes + (floats_per_row + ints_per_row) * 4 * DecodeGraphs::kMaxBucket + 4 * decode_partial_floats(c) +
         24 * static_cast<std::int64_t>(kAlign);  // 20 pieces, each aligned
}

CudaExecutor::AttentionLaunch CudaExecutor::attention_launch(bool decode, std::int64_t rows) const {
  const ModelConfig& c = model_->config();
  const bool grouped = kernels::attention_gqa_supported(c.num_heads, c.num_kv_heads, c.head_dim);
  const AttentionLaunch fallback = decode ? AttentionLaunch::Split : AttentionLaunch::Rows;
  switch (attention_kernel_) {
    case AttentionKernel::Rows: return AttentionLaunch::Rows;
    case AttentionKernel::Split: return AttentionLaunch::Split;
    case AttentionKernel::Gqa: return grouped ? AttentionLaunch::Gqa : fallback;
    case AttentionKernel::Auto: break;
  }
  return grouped && (!decode || rows >= kGqaDecodeRows) ? AttentionLaunch::Gqa : fallback;
}

std::int64_t CudaExecutor::attention_partial_floats(AttentionLaunch launch, std::int64_t n) const {
  const ModelConfig& c = model_->config();
  switch (launch) {
    case AttentionLaunch::Split: return kernels::attention_split_floats(n, c.num_heads, c.head_dim);
    case AttentionLaunch::Gqa: return kernels::attention_gqa_floats(n, c.num_heads, c.num_kv_heads, c.head_dim);
    case AttentionLaunch::Rows: break;
  }
  return 0;
}

CudaExecutor::CudaExecutor(std::shared_ptr<const DeviceModel> model, CudaExecutorOptions options, EventLoop& loop)
    : model_(std::move(model)),
      options_(options),
      loop_(loop),
      attention_kernel_(attention_kernel_from_environment()),
      graphs_(options.cuda_graphs, options.device),
      activations_(options.gpu) {
  must(cudaSetDevice(options_.gpu), "cudaSetDevice");
  must(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  if (options_.preload_kernels) {
    if (const Status s = kernels::preload_kernels(); !s.ok()) {
      std::fprintf(stderr, "cuda backend: gpu %d: %s\n", options_.gpu, s.message().c_str());
      std::abort();
    }
  }
  // cuda_backend_problem() says when the library cannot load, before any device is made.
  const kernels::CublasLibrary* library = kernels::cublas_library();
  if (!library) {
    std::fprintf(stderr, "cuda backend: %s\n", kernels::cublas_library_problem().c_str());
    std::abort();
  }
  const kernels::CublasLibrary& blas = *library;
  if (blas.create(&cublas_) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cuda backend: cublasCreate failed on gpu %d\n", options_.gpu);
    std::abort();
  }
  // The stream first: cublasSetStream resets the workspace (kernels::linear_cuda and
  // grouped_linear_cuda only set the stream when it differs, so this one stays).
  must(kernels::locked_malloc(&cublas_workspace_, kCublasWorkspaceBytes), "cudaMalloc (cuBLAS workspace)");
  if (blas.set_stream(cublas_, stream_) != CUBLAS_STATUS_SUCCESS ||
      blas.set_workspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cuda backend: cublasSetStream/cublasSetWorkspace failed on gpu %d\n", options_.gpu);
    std::abort();
  }
  for (cudaEvent_t* e : {&base_, &start_, &end_}) must(cudaEventCreate(e), "cudaEventCreate");
  dense_small_m_ = kernels::dense_small_m_enabled_by_env() && kernels::small_m_enabled_by_env();
  if (options_.attention_rank) {
    const ModelConfig& c = model_->config();
    kv_layer_floats_ =
        static_cast<std::int64_t>(options_.kv_pages + 1) * options_.page_size * c.num_kv_heads * c.head_dim;
    const auto bytes = static_cast<std::size_t>(kv_layer_floats_ * c.num_layers) * sizeof(float);
    must(kernels::locked_malloc(&kv_k_, std::max<std::size_t>(bytes, 4)), "cudaMalloc (KV cache keys)");
    must(kernels::locked_malloc(&kv_v_, std::max<std::size_t>(bytes, 4)), "cudaMalloc (KV cache values)");
  }
  must(cudaEventRecord(base_, stream_), "cudaEventRecord");
  must(cudaEventSynchronize(base_), "cudaEventSynchronize");
  base_ns_ = loop_.now();
  if (options_.attention_rank && options_.cuda_graphs) prepare_decode_graphs();
  thread_ = std::thread([this] { run_thread(); });
}

void CudaExecutor::finish() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  cudaSetDevice(options_.gpu);
  cudaStreamSynchronize(stream_);
}

CudaExecutor::~CudaExecutor() {
  finish();
  kernels::locked_free(kv_k_);
  kernels::locked_free(kv_v_);
  kernels::locked_free(decode_.device);
  kernels::locked_free_host(decode_.host);
  for (cudaEvent_t e : {base_, start_, end_}) cudaEventDestroy(e);
  kernels::cublas().destroy(cublas_);
  kernels::locked_free(cublas_workspace_);
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

Status CudaExecutor::dense_linears(const float* x, const float* up, const float* row_scale, std::int64_t n,
                                   std::initializer_list<LinearOut> outs, bool accumulate, bool& ran) {
  ran = false;
  if (!dense_small_m_ || n < 1 || n > kernels::kSmallMPieceRows) return Status::Ok();
  const kernels::WeightView& first = *outs.begin()->w;
  std::vector<kernels::DenseSmallMOutput> call;
  for (const LinearOut& o : outs) {
    assert(!o.w->empty() && "a weight this GPU did not load");
    if (o.w->dtype != first.dtype) return Status::Ok();  // one launch reads one weight type
    call.push_back({o.w->data, o.bias, o.y, o.w->rows});
  }
  kernels::DenseSmallMPlan plan;
  SY_RETURN_IF_ERROR(kernels::plan_dense_small_m_for(n, first.cols, first.dtype, call.data(),
                                                     static_cast<int>(call.size()), plan));
  if (!plan.use) return Status::Ok();
  ran = true;
  return kernels::dense_small_m_cuda(plan, x, up, row_scale, n, first.cols, first.dtype, call.data(),
                                     static_cast<int>(call.size()), accumulate, stream_);
}

Status CudaExecutor::linear(const float* x, std::int64_t n, const kernels::WeightView& w, const float* bias, float* y,
                            void* x_low, bool accumulate) {
  assert(!w.empty() && "a weight this GPU did not load");
  bool dense = false;
  SY_RETURN_IF_ERROR(dense_linears(x, nullptr, nullptr, n, {{&w, bias, y}}, accumulate, dense));
  if (dense) return Status::Ok();
  SY_RETURN_IF_ERROR(kernels::convert_from_f32_cuda(x, x_low, w.dtype, n * w.cols, stream_));
  return kernels::linear_cuda(cublas_, x_low, w.dtype, n, w.data, w.rows, w.cols, bias, y, accumulate, stream_);
}

Status CudaExecutor::linears(const float* x, std::int64_t n, std::initializer_list<LinearOut> outs, void* x_low) {
  bool dense = false;
  SY_RETURN_IF_ERROR(dense_linears(x, nullptr, nullptr, n, outs, false, dense));
  if (dense) return Status::Ok();
  const kernels::WeightView* converted = nullptr;  // the weight whose type x_low holds x in
  for (const LinearOut& o : outs) {
    assert(!o.w->empty() && "a weight this GPU did not load");
    assert((converted == nullptr || o.w->cols == converted->cols) && "linears of one input share its width");
    if (converted == nullptr || o.w->dtype != converted->dtype) {
      SY_RETURN_IF_ERROR(kernels::convert_from_f32_cuda(x, x_low, o.w->dtype, n * o.w->cols, stream_));
      converted = o.w;
    }
    SY_RETURN_IF_ERROR(
        kernels::linear_cuda(cublas_, x_low, o.w->dtype, n, o.w->data, o.w->rows, o.w->cols, o.bias, o.y, false, stream_));
  }
  return Status::Ok();
}

Status CudaExecutor::ffn(const FfnWeights& w, const float* x, std::int64_t n, const float* row_scale, float* y,
                         float* g, float* u, void* x_low) {
  assert(!w.empty() && "an FFN this GPU did not load");
  // swiglu_experts_cuda's steps for one problem, by plain GEMMs: the same roundings (x and h
  // to the weight type, silu as torch computes it) and the row weights applied last.
  SY_RETURN_IF_ERROR(linears(x, n, {{&w.gate, nullptr, g}, {&w.up, nullptr, u}}, x_low));
  return ffn_down(w, n, row_scale, y, g, u, x_low);
}

Status CudaExecutor::ffn_down(const FfnWeights& w, std::int64_t n, const float* row_scale, float* y, float* g,
                              const float* u, void* x_low) {
  // Through the small-m kernel silu·mul and the row weights happen inside the down projection.
  bool dense = false;
  SY_RETURN_IF_ERROR(dense_linears(g, u, row_scale, n, {{&w.down, nullptr, y}}, false, dense));
  if (dense) return Status::Ok();
  SY_RETURN_IF_ERROR(kernels::silu_mul_cuda(g, u, g, n * w.gate.rows, stream_));
  SY_RETURN_IF_ERROR(linear(g, n, w.down, nullptr, y, x_low));
  if (row_scale == nullptr) return Status::Ok();
  return kernels::scale_rows_cuda(y, row_scale, n, w.down.rows, stream_);
}

Status CudaExecutor::rmsnorm(const float* x, const VectorView& w, std::int64_t rows, std::int64_t dim, float* y) {
  return kernels::rmsnorm_cuda(x, w.data, w.dtype, model_->config().rms_norm_eps, rows, dim, y, stream_);
}

void CudaExecutor::attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences,
                             RoutedRows& routed, Completion done) {
  submit([this, block, &batch, sequences, &routed] { run_attention(block, batch, sequences, routed); }, done);
}

void CudaExecutor::experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert, Completion done) {
  submit([this, block, per_expert] { run_experts(block, per_expert); }, done);
}

void CudaExecutor::sample(TokenBatch& batch, std::span<const SequenceContext> sequences, std::vector<std::int32_t>& next,
                          std::vector<kernels::TokenLogprobs>& logprobs, std::vector<PromptLogprobs>& prompt_logprobs,
                          Completion done) {
  submit([this, &batch, sequences, &next, &logprobs, &prompt_logprobs] {
    run_sample(batch, sequences, next, logprobs, prompt_logprobs);
  },
         done);
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
  const std::int64_t K = c.top_k;
  assert(options_.attention_rank);
  const bool sparse = c.is_sparse(block);
  const bool has_shared = sparse && !w.shared_expert.empty();
  const bool shared_inline = has_shared && !routed.shared_apart;
  routed.shared_out.reset();
  routed.shared_pending = has_shared && routed.shared_apart;  // findep: run_shared_expert, an execution of its own

  std::int32_t stride = 1;
  for (const SequenceContext& s : sequences) stride = std::max(stride, s.pages);
  const auto n_seqs = static_cast<std::int64_t>(sequences.size());
  // A decode batch (one row per request, so row i is request i's) with a bucket and block
  // tables that fit the decode buffers' stride.
  if ((options_.cuda_graphs || options_.pad_decode) && n == n_seqs &&
      stride <= graph_table_stride(options_.kv_pages)) {
    if (const std::int32_t bucket = DecodeGraphs::bucket(n); bucket > 0) {
      run_decode_attention(block, batch, sequences, routed, bucket, shared_inline);
      return;
    }
  }

  // Row metadata in one upload: [token_seq | positions | tokens | block tables].
  host_meta_.assign(static_cast<std::size_t>(3 * n + n_seqs * stride), -1);
  std::int32_t* token_seq = host_meta_.data();
  std::int32_t* positions = token_seq + n;
  std::int32_t* tokens = positions + n;
  std::int32_t* tables = tokens + n;
  std::int32_t seq = 0;
  batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
    const SequenceContext& s = sequences[static_cast<std::size_t>(seq)];
    assert(s.request == batch.at(first).request);
    std::copy_n(s.block_table, s.pages, tables + static_cast<std::int64_t>(seq) * stride);
    for (std::int64_t r = first; r < first + rows; ++r) token_seq[r] = seq;
    ++seq;
  });
  // Gathered from the rows into the host buffer that is uploaded.
  for (std::int64_t r = 0; r < n; ++r) positions[r] = batch.at(r).position;
  if (block == 0)
    for (std::int64_t r = 0; r < n; ++r) tokens[r] = batch.at(r).token;
  std::int32_t* d_meta = meta_.get<std::int32_t>(static_cast<std::int64_t>(host_meta_.size()));
  must(cudaMemcpyAsync(d_meta, host_meta_.data(), host_meta_.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                       stream_),
       "cudaMemcpyAsync (attention metadata)");

  if (block == 0) batch.hidden = activations_.allocate(n, H);
  assert(batch.hidden.rows() == n && batch.hidden.width() == H);
  const Widths wd = widths();
  AttentionRows r;
  r.n = n;
  r.hidden = CudaActivationOps::data(batch.hidden);
  r.seq = d_meta;
  r.pos = d_meta + n;
  r.tokens = d_meta + 2 * n;
  r.tables = d_meta + 3 * n;
  r.stride = stride;
  r.normed = normed_.get<float>(n * H);
  r.q = q_.get<float>(n * wd.q);
  r.k = k_.get<float>(n * wd.kv);
  r.v = v_.get<float>(n * wd.kv);
  r.attn = attn_.get<float>(n * wd.q);
  r.out = out_.get<float>(n * wd.out);
  r.gate = gate_.get<float>(n);
  r.ffn_g = ffn_g_.get<float>(n * wd.ffn);
  r.ffn_u = ffn_u_.get<float>(n * wd.ffn);
  r.x_low = x_low_.get<float>(n * wd.x_low);  // 4 bytes per element: room for any type
  r.ids = ids_.get<std::int32_t>(n * K);
  r.weights = weights_.get<float>(n * K);
  r.launch = attention_launch(/*decode=*/n == n_seqs, n);
  if (const std::int64_t floats = attention_partial_floats(r.launch, n); floats > 0) r.partials = partials_.get<float>(floats);
  if (sparse) {
    routed.ffn_in = activations_.allocate(n, H);
    r.ffn_in = CudaActivationOps::data(routed.ffn_in);
    if (shared_inline) {
      routed.shared_out = activations_.allocate(n, H);
      r.shared_out = CudaActivationOps::data(routed.shared_out);
    }
  }
  must(attention_math(block, r));
  if (sparse) {
    routing_to_host(r, n, routed);
  }
  end_on_device();
}

void CudaExecutor::routing_to_host(const AttentionRows& r, std::int64_t n, RoutedRows& routed) {
  const auto slots = static_cast<std::size_t>(n * model_->config().top_k);
  routed.expert_ids.resize(slots);
  routed.expert_weights.resize(slots);
  must(cudaMemcpyAsync(routed.expert_ids.data(), r.ids, slots * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream_),
       "cudaMemcpyAsync (expert ids)");
  must(cudaMemcpyAsync(routed.expert_weights.data(), r.weights, slots * sizeof(float), cudaMemcpyDeviceToHost,
                       stream_),
       "cudaMemcpyAsync (expert weights)");
}

void CudaExecutor::ensure_decode_buffers() {
  if (decode_.device != nullptr) return;
  const ModelConfig& c = model_->config();
  const Widths w = widths();
  const std::int64_t B = DecodeGraphs::kMaxBucket;
  const std::int64_t K = c.top_k;
  const std::int32_t ts = graph_table_stride(options_.kv_pages);
  // One allocation carved into aligned pieces (fixed_bytes counts the same pieces).
  std::size_t at = 0;
  auto piece = [&](std::int64_t words) {
    const std::size_t here = at;
    at += aligned(static_cast<std::size_t>(std::max<std::int64_t>(words, 1)) * 4);
    return here;
  };
  const std::size_t hidden = piece(B * w.hidden), ffn_in = piece(B * w.hidden), shared_out = piece(B * w.hidden),
                    normed = piece(B * w.hidden), q = piece(B * w.q), attn = piece(B * w.q), k = piece(B * w.kv),
                    v = piece(B * w.kv), out = piece(B * w.out), gate = piece(B), ffn_g = piece(B * w.ffn),
                    ffn_u = piece(B * w.ffn), x_low = piece(B * w.x_low), ids = piece(B * K),
                    weights = piece(B * K), seq = piece(B), pos = piece(B), tokens = piece(B),
                    tables = piece(B * ts), partials = piece(decode_partial_floats(c));
  must(kernels::locked_malloc(&decode_.device, at), "cudaMalloc (decode buffers)");
  char* base = static_cast<char*>(decode_.device);
  auto f = [&](std::size_t offset) { return reinterpret_cast<float*>(base + offset); };
  auto i32 = [&](std::size_t offset) { return reinterpret_cast<std::int32_t*>(base + offset); };
  AttentionRows& r = decode_.rows;
  r.hidden = f(hidden);
  r.ffn_in = f(ffn_in);
  r.shared_out = f(shared_out);
  r.normed = f(normed);
  r.q = f(q);
  r.attn = f(attn);
  r.k = f(k);
  r.v = f(v);
  r.out = f(out);
  r.gate = f(gate);
  r.ffn_g = f(ffn_g);
  r.ffn_u = f(ffn_u);
  r.x_low = base + x_low;
  r.ids = i32(ids);
  r.weights = f(weights);
  r.partials = f(partials);
  r.launch = attention_launch(/*decode=*/true, B);
  r.seq = i32(seq);
  r.pos = decode_.pos = i32(pos);
  r.tokens = decode_.tokens = i32(tokens);
  r.tables = decode_.tables = i32(tables);
  r.stride = ts;
  decode_.table_stride = ts;
  must(kernels::locked_malloc_host(&decode_.host, static_cast<std::size_t>(2 * B + B * ts) * 4),
       "cudaMallocHost (decode metadata staging)");
  // Zeros everywhere (padded rows never see stale NaNs); row i of the bucket is sequence i.
  must(cudaMemsetAsync(decode_.device, 0, at, stream_), "cudaMemsetAsync (decode buffers)");
  std::vector<std::int32_t> identity(static_cast<std::size_t>(B));
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(B); ++i) identity[static_cast<std::size_t>(i)] = i;
  must(cudaMemcpyAsync(i32(seq), identity.data(), identity.size() * 4, cudaMemcpyHostToDevice, stream_),
       "cudaMemcpyAsync (decode rows)");
  must(cudaStreamSynchronize(stream_), "decode buffers");
}

void CudaExecutor::upload_decode_metadata(std::int64_t rows, std::int32_t stride, bool with_tokens) {
  DecodeBuffers& d = decode_;
  const std::int32_t* pos = d.host;
  const std::int32_t* tokens = d.host + DecodeGraphs::kMaxBucket;
  const std::int32_t* tables = d.host + 2 * DecodeGraphs::kMaxBucket;
  must(cudaMemcpyAsync(d.pos, pos, static_cast<std::size_t>(rows) * 4, cudaMemcpyHostToDevice, stream_),
       "cudaMemcpyAsync (decode positions)");
  if (with_tokens)
    must(cudaMemcpyAsync(d.tokens, tokens, static_cast<std::size_t>(rows) * 4, cudaMemcpyHostToDevice, stream_),
         "cudaMemcpyAsync (decode tokens)");
  // Row i's table at the fixed stride; entries past a sequence's pages are never read.
  must(cudaMemcpy2DAsync(d.tables, static_cast<std::size_t>(d.table_stride) * 4, tables,
                         static_cast<std::size_t>(stride) * 4, static_cast<std::size_t>(stride) * 4,
                         static_cast<std::size_t>(rows), cudaMemcpyHostToDevice, stream_),
       "cudaMemcpy2DAsync (decode block tables)");
}

void CudaExecutor::prepare_decode_graphs() {
  ensure_decode_buffers();
  const ModelConfig& c = model_->config();
  const std::int64_t H = c.hidden_size;
  const std::int32_t B = DecodeGraphs::kMaxBucket;
  DecodeBuffers& d = decode_;
  // Every row a padded one, as run_decode_attention pads: position 0 of the page past the KV
  // block manager's, token 0, zero hidden rows. The graphs only keep the addresses; what the
  // warm-ups compute here is thrown away (their keys land on that page alone).
  std::int32_t* pos = d.host;
  std::int32_t* tokens = d.host + B;
  std::int32_t* tables = d.host + 2 * B;
  std::fill_n(pos, B, 0);
  std::fill_n(tokens, B, 0);
  std::fill_n(tables, B, options_.kv_pages);
  upload_decode_metadata(B, 1, /*with_tokens=*/true);
  for (std::int32_t block = 0; block < c.num_layers; ++block) {
    const bool has_shared = c.is_sparse(block) && !model_->layer(block).shared_expert.empty();
    for (std::int32_t bucket = 1; bucket <= B; bucket *= 2) {
      for (const bool shared_inline : {false, true}) {
        if (shared_inline && !has_shared) continue;
        AttentionRows r = d.rows;
        r.n = bucket;
        r.launch = attention_launch(/*decode=*/true, bucket);  // as run_decode_attention picks it
        if (!shared_inline) r.shared_out = nullptr;
        // The warm-up adds to the hidden rows in place: start each from zeros again.
        must(cudaMemsetAsync(r.hidden, 0, static_cast<std::size_t>(bucket * H) * 4, stream_),
             "cudaMemsetAsync (padded rows)");
        must(graphs_.prepare({block, bucket, shared_inline}, stream_, [&] { return attention_math(block, r); }));
      }
    }
  }
  must(cudaStreamSynchronize(stream_), "decode graphs (warm-up)");
}

void CudaExecutor::run_decode_attention(std::int32_t block, TokenBatch& batch,
                                        std::span<const SequenceContext> sequences, RoutedRows& routed,
                                        std::int32_t bucket, bool shared_inline) {
  ensure_decode_buffers();
  const ModelConfig& c = model_->config();
  const std::int64_t H = c.hidden_size;
  const std::int64_t n = batch.rows();
  const std::int64_t B = bucket;
  const bool sparse = c.is_sparse(block);
  DecodeBuffers& d = decode_;
  assert(n >= 1 && n <= B && B <= DecodeGraphs::kMaxBucket);

  // Metadata of the B rows, staged in pinned memory (free: the previous execution's copies
  // finished before it completed) and copied to the fixed device rows. Padded rows sit at
  // position 0 of the page past the KV block manager's (kv_pages): their keys go there, so
  // no sequence's cache is touched, and they attend to that one key. Their hidden rows are
  // zeros (block 0: token 0's embedding), so every padded row is the same finite row.
  std::int32_t stride = 1;
  for (const SequenceContext& s : sequences) stride = std::max(stride, s.pages);
  std::int32_t* pos = d.host;
  std::int32_t* tokens = d.host + DecodeGraphs::kMaxBucket;
  std::int32_t* tables = d.host + 2 * DecodeGraphs::kMaxBucket;
  std::fill_n(tables, B * stride, -1);
  for (std::int64_t i = 0; i < B; ++i) {
    std::int32_t* table = tables + i * stride;
    if (i < n) {
      const SequenceContext& s = sequences[static_cast<std::size_t>(i)];
      assert(s.request == batch.at(i).request);
      pos[i] = batch.at(i).position;
      tokens[i] = block == 0 ? batch.at(i).token : 0;
      std::copy_n(s.block_table, s.pages, table);
    } else {
      pos[i] = 0;
      tokens[i] = 0;
      table[0] = options_.kv_pages;
    }
  }
  upload_decode_metadata(B, stride, /*with_tokens=*/block == 0);

  AttentionRows r = d.rows;
  r.n = B;
  r.launch = attention_launch(/*decode=*/true, B);  // the launch the bucket's graph was captured with
  if (!shared_inline) r.shared_out = nullptr;
  if (block > 0) {
    assert(batch.hidden.rows() == n && batch.hidden.width() == H);
    must(cudaMemcpyAsync(r.hidden, CudaActivationOps::data(batch.hidden), static_cast<std::size_t>(n * H) * 4,
                         cudaMemcpyDeviceToDevice, stream_),
         "cudaMemcpyAsync (decode hidden rows in)");
    if (B > n)
      must(cudaMemsetAsync(r.hidden + n * H, 0, static_cast<std::size_t>((B - n) * H) * 4, stream_),
           "cudaMemsetAsync (padded rows)");
  }
  must(graphs_.run({block, bucket, shared_inline}, stream_, [&] { return attention_math(block, r); }));

  // The n real rows back out of the fixed buffers.
  if (block == 0) batch.hidden = activations_.allocate(n, H);
  auto copy_out = [&](float* dst, const float* src, const char* what) {
    must(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(n * H) * 4, cudaMemcpyDeviceToDevice, stream_), what);
  };
  copy_out(CudaActivationOps::data(batch.hidden), r.hidden, "cudaMemcpyAsync (decode hidden rows out)");
  if (sparse) {
    routed.ffn_in = activations_.allocate(n, H);
    copy_out(CudaActivationOps::data(routed.ffn_in), r.ffn_in, "cudaMemcpyAsync (decode ffn input out)");
    if (shared_inline) {
      routed.shared_out = activations_.allocate(n, H);
      copy_out(CudaActivationOps::data(routed.shared_out), r.shared_out, "cudaMemcpyAsync (decode shared out)");
    }
    routing_to_host(r, n, routed);
  }
  end_on_device();
}

Status CudaExecutor::attention_math(std::int32_t block, const AttentionRows& r) {
  const ModelConfig& c = model_->config();
  const LayerWeights& w = model_->layer(block);
  const std::int64_t H = c.hidden_size;
  const std::int64_t n = r.n;
  if (block == 0) {
    const kernels::WeightView& e = model_->embed_tokens();
    SY_RETURN_IF_ERROR(kernels::embedding_cuda(e.data, e.dtype, e.rows, e.cols, r.tokens, n, r.hidden, stream_));
  }
  // ModelOps::attention.
  SY_RETURN_IF_ERROR(rmsnorm(r.hidden, w.input_norm, n, H, r.normed));
  SY_RETURN_IF_ERROR(
      linears(r.normed, n, {{&w.q_proj, w.q_bias, r.q}, {&w.k_proj, w.k_bias, r.k}, {&w.v_proj, w.v_bias, r.v}}, r.x_low));
  if (c.qk_norm) {
    // Per head (qwen3_moe) or over each row's whole projection (olmoe), as on the cpu.
    const std::int64_t q_rows = c.qk_norm_per_head ? c.num_heads : 1, kv_rows = c.qk_norm_per_head ? c.num_kv_heads : 1;
    const std::int64_t q_width = static_cast<std::int64_t>(c.num_heads) * c.head_dim;
    const std::int64_t kv_width = static_cast<std::int64_t>(c.num_kv_heads) * c.head_dim;
    SY_RETURN_IF_ERROR(rmsnorm(r.q, w.q_norm, n * q_rows, q_width / q_rows, r.q));
    SY_RETURN_IF_ERROR(rmsnorm(r.k, w.k_norm, n * kv_rows, kv_width / kv_rows, r.k));
  }
  const float rope_scale = model_->rope_attention_scaling();
  SY_RETURN_IF_ERROR(kernels::rope_cuda(r.q, n, c.num_heads, c.head_dim, model_->inv_freq(), r.pos, rope_scale, stream_));
  SY_RETURN_IF_ERROR(kernels::rope_cuda(r.k, n, c.num_kv_heads, c.head_dim, model_->inv_freq(), r.pos, rope_scale, stream_));
  const kernels::KvLayerView view{kv_k_ + block * kv_layer_floats_, kv_v_ + block * kv_layer_floats_,
                                  options_.kv_pages + 1, options_.page_size, c.num_kv_heads, c.head_dim};
  SY_RETURN_IF_ERROR(kernels::kv_cache_write_cuda(view, r.tables, r.stride, r.seq, r.pos, n, r.k, r.v, stream_));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  if (r.launch == AttentionLaunch::Gqa) {
    SY_RETURN_IF_ERROR(kernels::paged_attention_gqa_cuda(r.q, n, c.num_heads, r.seq, r.pos, view, r.tables, r.stride,
                                                         scale, r.partials, r.attn, stream_));
  } else if (r.launch == AttentionLaunch::Split) {
    SY_RETURN_IF_ERROR(kernels::paged_attention_split_cuda(r.q, n, c.num_heads, r.seq, r.pos, view, r.tables, r.stride,
                                                           scale, r.partials, r.attn, stream_));
  } else {
    SY_RETURN_IF_ERROR(kernels::paged_attention_prefill_cuda(r.q, n, c.num_heads, r.seq, r.pos, view, r.tables,
                                                             r.stride, scale, r.attn, stream_));
  }
  SY_RETURN_IF_ERROR(linear(r.attn, n, w.o_proj, nullptr, r.hidden, r.x_low, /*accumulate=*/true));

  if (!c.is_sparse(block)) {
    // ModelOps::ffn of a dense block: hidden += mlp(post_attention_norm(hidden)).
    SY_RETURN_IF_ERROR(rmsnorm(r.hidden, w.post_attention_norm, n, H, r.normed));
    SY_RETURN_IF_ERROR(ffn(w.dense_mlp, r.normed, n, nullptr, r.out, r.ffn_g, r.ffn_u, r.x_low));
    return kernels::combine_cuda(r.out, nullptr, n, 1, H, r.hidden, stream_);
  }
  SY_RETURN_IF_ERROR(rmsnorm(r.hidden, w.post_attention_norm, n, H, r.ffn_in));
  SY_RETURN_IF_ERROR(linear(r.ffn_in, n, w.router, nullptr, r.out, r.x_low));
  SY_RETURN_IF_ERROR(
      kernels::router_topk_cuda(r.out, n, c.num_experts, c.top_k, c.norm_topk_prob, r.ids, r.weights, stream_));
  if (r.shared_out == nullptr) return Status::Ok();
  return shared_ffn(w, r.ffn_in, n, r.shared_out, r.gate, r.ffn_g, r.ffn_u, r.x_low);
}

Status CudaExecutor::shared_ffn(const LayerWeights& w, const float* x, std::int64_t n, float* out, float* gate,
                                float* g, float* u, void* x_low) {
  SY_RETURN_IF_ERROR(linears(
      x, n, {{&w.shared_expert_gate, nullptr, gate}, {&w.shared_expert.gate, nullptr, g}, {&w.shared_expert.up, nullptr, u}},
      x_low));
  SY_RETURN_IF_ERROR(kernels::sigmoid_cuda(gate, n, stream_));
  return ffn_down(w.shared_expert, n, gate, out, g, u, x_low);
}

void CudaExecutor::run_shared_expert(std::int32_t block, TokenBatch& batch) {
  const std::int64_t H = model_->config().hidden_size;
  const std::int64_t n = batch.rows();
  assert(batch.hidden.rows() == n && batch.hidden.width() == H);
  Activations out = activations_.allocate(n, H);
  if (n > 0) {
    const Widths wd = widths();
    must(shared_ffn(model_->layer(block), CudaActivationOps::data(batch.hidden), n, CudaActivationOps::data(out),
                    gate_.get<float>(n), ffn_g_.get<float>(n * wd.ffn), ffn_u_.get<float>(n * wd.ffn),
                    x_low_.get<float>(n * wd.x_low)));
  }
  end_on_device();
  batch.hidden = std::move(out);  // the input goes back to the pool once the GPU is done with it
}

void CudaExecutor::run_experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert) {
  const ModelConfig& c = model_->config();
  const LayerWeights& w = model_->layer(block);
  const std::int64_t H = c.hidden_size;
  // The routing weights of every batch in one upload.
  std::vector<float> scales;
  for (const TokenBatch* b : per_expert)
    for (const TokenRow& row : b->row) scales.push_back(row.weight);
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

void CudaExecutor::score_prompt(const TokenBatch& batch, std::int64_t first, std::int64_t rows,
                                const SequenceContext& s, std::vector<PromptLogprobs>& out) {
  const ModelConfig& c = model_->config();
  const std::int64_t H = c.hidden_size;
  const std::int32_t V = c.vocab_size;
  std::vector<float> host(static_cast<std::size_t>(kPromptRowsPerPass * V));
  score_prompt_rows(batch, first, rows, s, V, out, [&](const std::vector<std::int32_t>& slice) {
    const auto m = static_cast<std::int64_t>(slice.size());
    std::int32_t* d_rows = prompt_rows_.get<std::int32_t>(m);
    must(cudaMemcpyAsync(d_rows, slice.data(), slice.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_),
         "cudaMemcpyAsync (prompt rows)");
    float* logits = prompt_logits_.get<float>(m * V);
    lm_head_rows(batch.hidden, d_rows, m, prompt_normed_.get<float>(m * H), logits, prompt_low_.get<float>(m * H));
    must(cudaMemcpyAsync(host.data(), logits, static_cast<std::size_t>(m * V) * sizeof(float), cudaMemcpyDeviceToHost,
                         stream_),
         "cudaMemcpyAsync (prompt logits)");
    // `slice` and `host` are read and written again next pass: wait for this one.
    must(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (prompt logits)");
    return static_cast<const float*>(host.data());
  });
}

void CudaExecutor::lm_head_rows(const Activations& hidden, const std::int32_t* d_rows, std::int64_t m, float* normed,
                                float* logits, float* low) {
  // ModelOps::logits: final norm of the gathered rows, then lm_head.
  const std::int64_t H = model_->config().hidden_size;
  must(kernels::gather_rows_cuda(CudaActivationOps::data(hidden), d_rows, m, H, normed, stream_));
  must(rmsnorm(normed, model_->final_norm(), m, H, normed));
  must(linear(normed, m, model_->lm_head(), nullptr, logits, low));
}

void CudaExecutor::run_sample(TokenBatch& batch, std::span<const SequenceContext> sequences,
                              std::vector<std::int32_t>& next, std::vector<kernels::TokenLogprobs>& logprobs,
                              std::vector<PromptLogprobs>& prompt_logprobs) {
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
  std::vector<kernels::PenaltyEntry> penalties;  // one per (row, distinct token sampled so far)
  // Guided decoding: each guided row's mask, padded with clear bits to the model's vocabulary
  // (ids past the tokenizer's are never allowed), applied by mask_logits_cuda before the
  // log-probabilities are copied (vLLM's order, as the cpu's).
  const std::int32_t mask_words = kernels::token_mask_words(V);
  std::vector<std::int32_t> mask_rows;
  std::vector<std::uint32_t> masks;
  bool any_logprobs = false;
  for (std::size_t i = 0; i < last_rows.size(); ++i) {
    const SamplingSpec& s = sequences[i].sampling;
    const std::int32_t position = batch.at(last_rows[i]).position;
    params[i] = {s.temperature, s.top_p, s.top_k,
                 kernels::sampling_uniform(kernels::position_seed(s.seed, position)), s.min_p};
    any_logprobs = any_logprobs || s.logprobs >= 0;
    if (const std::span<const std::uint32_t> allowed = sequences[i].allowed; !allowed.empty()) {
      mask_rows.push_back(static_cast<std::int32_t>(i));
      const std::size_t at = masks.size();
      masks.resize(at + static_cast<std::size_t>(mask_words), 0u);
      std::copy_n(allowed.begin(), std::min(allowed.size(), static_cast<std::size_t>(mask_words)), masks.begin() + at);
    }
    if (s.penalized() || !sequences[i].logit_bias.empty())
      kernels::append_penalty_entries(penalties, static_cast<std::int32_t>(i), V,
                                      kernels::penalty_terms(sequences[i].prompt, sequences[i].outputs, s.penalties()),
                                      sequences[i].logit_bias, s.penalties());
  }
  std::int32_t* d_rows = rows_.get<std::int32_t>(m);
  must(cudaMemcpyAsync(d_rows, last_rows.data(), last_rows.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                       stream_),
       "cudaMemcpyAsync (rows)");
  auto* d_params = params_.get<kernels::DeviceSamplingParams>(m);
  must(cudaMemcpyAsync(d_params, params.data(), params.size() * sizeof(kernels::DeviceSamplingParams),
                       cudaMemcpyHostToDevice, stream_),
       "cudaMemcpyAsync (sampling settings)");
  float* logits = logits_.get<float>(m * V);
  lm_head_rows(batch.hidden, d_rows, m, normed_.get<float>(m * H), logits, x_low_.get<float>(m * H));
  if (!mask_rows.empty()) {
    const auto guided = static_cast<std::int64_t>(mask_rows.size());
    auto* d_mask_rows = mask_rows_.get<std::int32_t>(guided);
    auto* d_masks = masks_.get<std::uint32_t>(static_cast<std::int64_t>(masks.size()));
    // From pageable memory: staged before cudaMemcpyAsync returns, so the vectors may go.
    must(cudaMemcpyAsync(d_mask_rows, mask_rows.data(), mask_rows.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                         stream_),
         "cudaMemcpyAsync (guided rows)");
    must(cudaMemcpyAsync(d_masks, masks.data(), masks.size() * sizeof(std::uint32_t), cudaMemcpyHostToDevice, stream_),
         "cudaMemcpyAsync (guided-decoding masks)");
    must(kernels::mask_logits_cuda(logits, V, d_mask_rows, d_masks, guided, stream_));
  }
  // The log-probabilities are of the raw logits (vLLM's default; masked under guided decoding):
  // copied before the penalties.
  if (any_logprobs) {
    host_logits_.resize(static_cast<std::size_t>(m * V));
    must(cudaMemcpyAsync(host_logits_.data(), logits, host_logits_.size() * sizeof(float), cudaMemcpyDeviceToHost,
                         stream_),
         "cudaMemcpyAsync (logits)");
  }
  if (!penalties.empty()) {
    auto* d_penalties = penalties_.get<kernels::PenaltyEntry>(static_cast<std::int64_t>(penalties.size()));
    // From pageable memory: staged before cudaMemcpyAsync returns, so the vector may go.
    must(cudaMemcpyAsync(d_penalties, penalties.data(), penalties.size() * sizeof(kernels::PenaltyEntry),
                         cudaMemcpyHostToDevice, stream_),
         "cudaMemcpyAsync (penalties)");
    must(kernels::penalize_cuda(logits, V, d_penalties, static_cast<std::int64_t>(penalties.size()), stream_));
  }
  std::int32_t* d_next = tokens_.get<std::int32_t>(m);
  must(kernels::sample_cuda(logits, m, V, d_params, d_next, stream_));
  next.resize(last_rows.size());
  must(cudaMemcpyAsync(next.data(), d_next, next.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost, stream_),
       "cudaMemcpyAsync (next tokens)");
  // Before the execution's end: its span covers the prompt's rows too.
  prompt_logprobs.clear();
  std::size_t request = 0;
  batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
    const SequenceContext& s = sequences[request++];
    if (s.sampling.prompt_logprobs >= 0) score_prompt(batch, first, rows, s, prompt_logprobs);
  });
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
