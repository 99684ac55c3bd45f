// The cuda backend's executor: one worker's math on a GPU, on a CUDA stream of its own (several
// workers may share a GPU, each with its stream). Each execution is queued on a host thread
// of the worker's that launches its kernels, waits for the stream and posts the completion
// to the wall-clock event loop, timed by CUDA events on the device. Attention ranks keep
// their paged KV cache in GPU memory; activations live in CudaActivationOps pools. Decode
// attention executions run as CUDA graphs (decode_graphs.h) over fixed decode buffers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "engine/cuda/cuda_activation_ops.h"
#include "engine/cuda/decode_graphs.h"
#include "engine/cuda/device_model.h"
#include "engine/runtime/event_loop.h"
#include "engine/runtime/executor.h"
#include "kernels/cuda/cuda_kernels.h"

namespace sy {

struct CudaExecutorOptions {
  int gpu = 0;
  std::int32_t device = 0;  // the worker's device index, for thread names and messages
  bool attention_rank = false;
  std::int32_t kv_pages = 0;
  std::int32_t page_size = 16;
  // Decode attention executions (one row per request) padded to a batch-size bucket and run
  // as CUDA graphs; false (--cuda-graphs off) runs every execution eagerly, unpadded.
  bool cuda_graphs = true;
  // Without graphs: pad decode batches to the buckets all the same, so that the very kernels
  // of the graphs run eagerly on the same shapes (the tests compare the two bit for bit).
  bool pad_decode = false;
  // NCCL links carry rows to or from this GPU (several GPUs in one process, or ranks of a
  // launcher): every kernel of kernels/cuda is loaded before the executor serves, since a lazy
  // first launch may wait for an NCCL kernel that waits for its peer (kernel_preload.h).
  bool preload_kernels = false;
};

// Growable device memory for one kind of scratch; only the executor's thread uses it.
class DeviceScratch {
 public:
  DeviceScratch() = default;
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch();
  template <class T>
  T* get(std::int64_t n) {
    return static_cast<T*>(reserve(static_cast<std::size_t>(n < 1 ? 1 : n) * sizeof(T)));
  }

 private:
  void* reserve(std::size_t bytes);
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

class CudaExecutor final : public Executor {
 public:
  CudaExecutor(std::shared_ptr<const DeviceModel> model, CudaExecutorOptions options, EventLoop& loop);
  ~CudaExecutor() override;

  void attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences, RoutedRows& routed,
                 Completion done) override;
  void experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert, Completion done) override;
  void shared_expert(std::int32_t block, TokenBatch& batch, Completion done) override;
  void sample(TokenBatch& batch, std::span<const SequenceContext> sequences, std::vector<std::int32_t>& next,
              std::vector<kernels::TokenLogprobs>& logprobs, std::vector<PromptLogprobs>& prompt_logprobs,
              Completion done) override;
  void merge(std::vector<TokenPool::Completed>& merges, Completion done) override;
  void finish() override;

  // What ExpertResidency counts against this device (get_state's weights): one routed
  // expert's bytes on its GPU and an attention rank's KV cache. The GPU's devices share one
  // upload of the weights (owns_expert_weights stays false), so placement changes copy nothing.
  std::int64_t expert_bytes() const override;
  std::int64_t kv_storage_bytes() const override;

  // KV cache bytes of an attention rank with these options (the deployment's fit check).
  static std::int64_t kv_bytes(const ModelConfig& config, std::int32_t kv_pages, std::int32_t page_size);
  // Device bytes an executor keeps besides its KV cache and growable scratch: the cuBLAS
  // workspace and an attention rank's fixed decode buffers (the deployment's fit check).
  static std::int64_t fixed_bytes(const ModelConfig& config, bool attention_rank, std::int32_t kv_pages);

  // Graph captures and replays so far (tests check that graphs are reused).
  CudaGraphStats graph_stats() const { return graphs_.stats(); }

  // Which kernels run attention (SY_CUDA_ATTENTION). Auto, from bench_cuda on an H100
  // (2026-11-28; Qwen3-30B-A3B's 32 query heads over 4 KV heads): where the model's grouping
  // allows paged_attention_gqa_cuda, it runs prompts (1.14x the one-block-per-row-and-head
  // kernel at 512 rows) and decode executions of at least kGqaDecodeRows rows (1.24x the split
  // kernel at 32, 1.30x at 128); smaller decode executions run paged_attention_split_cuda
  // (0.016 ms at one row against the grouped kernel's 0.032, and 7x the per-head kernel).
  // Without the grouping: the split kernel for decode, the per-head kernel for prompts.
  // Rows, Split: that kernel for every execution; Gqa: the grouped one wherever it can run.
  enum class AttentionKernel { Auto, Rows, Split, Gqa };
  static constexpr std::int64_t kGqaDecodeRows = 32;
  // The kernel one execution runs.
  enum class AttentionLaunch { Rows, Split, Gqa };

 private:
  AttentionLaunch attention_launch(bool decode, std::int64_t rows) const;
  // Floats of partials an execution of n rows needs under `launch`.
  std::int64_t attention_partial_floats(AttentionLaunch launch, std::int64_t n) const;
  void submit(std::function<void()> work, Completion done);
  void run_thread();
  // Records the execution's end on the stream and waits for it: kernels are done after this.
  void end_on_device();

  // Where an attention execution's rows and scratch live: the batch's activations and growable
  // scratch (eager), or the fixed decode buffers a graph was captured over (padded decode).
  struct AttentionRows {
    std::int64_t n = 0;
    float* hidden = nullptr;      // in place; block 0 embeds `tokens` into it first
    float* ffn_in = nullptr;      // sparse blocks: the experts' input
    float* shared_out = nullptr;  // sparse blocks with the shared expert inline, else null
    std::int32_t* ids = nullptr;  // sparse blocks: router top-k, n × K
    float* weights = nullptr;
    const std::int32_t* seq = nullptr;  // device metadata, see kv_cache_write_cuda
    const std::int32_t* pos = nullptr;
    const std::int32_t* tokens = nullptr;
    const std::int32_t* tables = nullptr;
    std::int32_t stride = 1;
    float *normed = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *attn = nullptr, *out = nullptr,
          *gate = nullptr, *ffn_g = nullptr, *ffn_u = nullptr;
    void* x_low = nullptr;  // n × widest linear input, 4 bytes an element
    float* partials = nullptr;  // the split kernel's partial softmaxes (null where it does not split)
    AttentionLaunch launch = AttentionLaunch::Rows;  // see AttentionKernel
  };
  // The fixed buffers of padded decode executions, for DecodeGraphs::kMaxBucket rows, made
  // before the first capture and never moved (a graph replays the addresses it captured).
  struct DecodeBuffers {
    void* device = nullptr;
    std::int32_t* host = nullptr;  // pinned staging: positions, tokens, block tables
    std::int32_t table_stride = 0;
    AttentionRows rows;            // for kMaxBucket rows; n is set per execution
    std::int32_t* pos = nullptr;   // the device metadata rows.* point into
    std::int32_t* tokens = nullptr;
    std::int32_t* tables = nullptr;
  };
  // Widths of the scratch rows (floats per row).
  struct Widths {
    std::int64_t hidden, q, kv, out, ffn, x_low;
  };
  Widths widths() const;

  void run_attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences,
                     RoutedRows& routed);
  // A decode batch padded to `bucket` rows over the decode buffers, as a graph where possible.
  void run_decode_attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences,
                            RoutedRows& routed, std::int32_t bucket, bool shared_inline);
  // The math of ModelOps::attention (and the dense MLP, or the router and an inline shared
  // expert) queued on the stream; capturable: no allocation, no host copy, no synchronisation.
  Status attention_math(std::int32_t block, const AttentionRows& r);
  void ensure_decode_buffers();
  // The router's top-k of the first n rows of r into routed (the dispatch reads them on the host).
  void routing_to_host(const AttentionRows& r, std::int64_t n, RoutedRows& routed);
  // Captures the decode graph of every (block, bucket, shared expert inline) over padded rows
  // only, before the executor's thread starts (see DecodeGraphs::prepare for why not later).
  void prepare_decode_graphs();
  // The first `rows` rows of the pinned staging (positions, tokens when asked, block tables of
  // `stride` entries per row) to the fixed decode buffers, on the stream.
  void upload_decode_metadata(std::int64_t rows, std::int32_t stride, bool with_tokens);
  void run_experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert);
  void run_shared_expert(std::int32_t block, TokenBatch& batch);
  // out[n, H] = sigmoid(shared_expert_gate(x)) · shared_expert(x) (qwen2_moe), on the stream;
  // gate: n floats, g and u: n × I, x_low: n × max(H, I) scratch.
  Status shared_ffn(const LayerWeights& w, const float* x, std::int64_t n, float* out, float* gate, float* g, float* u,
                    void* x_low);
  void run_sample(TokenBatch& batch, std::span<const SequenceContext> sequences, std::vector<std::int32_t>& next,
                  std::vector<kernels::TokenLogprobs>& logprobs, std::vector<PromptLogprobs>& prompt_logprobs);
  // The prompt tokens that the request's rows [first, first + rows) of `batch` score
  // (Executor::sample): lm_head over those rows as for the last ones, the logits copied to the
  // host, the log-probabilities by the cpu kernel. Not yet run on a GPU.
  void score_prompt(const TokenBatch& batch, std::int64_t first, std::int64_t rows, const SequenceContext& s,
                    std::vector<PromptLogprobs>& out);
  // ModelOps::logits on the GPU: the final norm of the `m` rows of `hidden` at d_rows (into
  // `normed`), then lm_head into `logits` (`low`: the rows in the weights' type), queued on the stream.
  void lm_head_rows(const Activations& hidden, const std::int32_t* d_rows, std::int64_t m, float* normed,
                    float* logits, float* low);
  void run_merge(std::vector<TokenPool::Completed>& merges);

  // y[n, w.rows] (+)= x[n, w.cols] · Wᵀ (+ bias): x converted to the weight's type in x_low first.
  Status linear(const float* x, std::int64_t n, const kernels::WeightView& w, const float* bias, float* y,
                void* x_low, bool accumulate = false);
  // y = x · Wᵀ (+ bias) for several linears of one input (q/k/v, an FFN's gate and up): x is
  // converted once while the weights share a type, not once per GEMM (a launch each, which at
  // decode costs about what the GEMM does).
  struct LinearOut {
    const kernels::WeightView* w;
    const float* bias;
    float* y;
  };
  Status linears(const float* x, std::int64_t n, std::initializer_list<LinearOut> outs, void* x_low);
  // The same linears through the small-m kernel in one launch, x rounded on the way in (no
  // conversion launch; with up, silu(x)·up as ffn_down's input), where dense_small_m_ is on and
  // plan_dense_small_m takes the shape; ran is false when it did not run (the caller runs cuBLAS).
  Status dense_linears(const float* x, const float* up, const float* row_scale, std::int64_t n,
                       std::initializer_list<LinearOut> outs, bool accumulate, bool& ran);
  // The rest of an FFN once g and u hold its gate and up projections: y = row_scale ⊙
  // down(silu(g) ⊙ u).
  Status ffn_down(const FfnWeights& w, std::int64_t n, const float* row_scale, float* y, float* g, const float* u,
                  void* x_low);
  // y = row_scale ⊙ ffn(x) for one SwiGLU FFN (dense and shared), by plain GEMMs so that it
  // can be captured (the grouped path uploads per-call pointer tables from the host); g and u
  // are n × I scratch.
  Status ffn(const FfnWeights& w, const float* x, std::int64_t n, const float* row_scale, float* y, float* g,
             float* u, void* x_low);
  Status rmsnorm(const float* x, const VectorView& w, std::int64_t rows, std::int64_t dim, float* y);

  std::shared_ptr<const DeviceModel> model_;
  CudaExecutorOptions options_;
  EventLoop& loop_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  cudaEvent_t base_ = nullptr, start_ = nullptr, end_ = nullptr;
  std::int64_t base_ns_ = 0;  // loop time of base_
  bool ended_ = false;
  float* kv_k_ = nullptr;
  float* kv_v_ = nullptr;
  std::int64_t kv_layer_floats_ = 0;
  DeviceScratch meta_, normed_, x_low_, q_, k_, v_, attn_, out_, logits_, ids_, weights_, gate_, scale_, rows_,
      params_, tokens_, ffn_g_, ffn_u_, penalties_, partials_, mask_rows_, masks_;
  // score_prompt's own, so that the sampling's buffers stay put while its kernels are queued.
  DeviceScratch prompt_rows_, prompt_normed_, prompt_low_, prompt_logits_;
  AttentionKernel attention_kernel_ = AttentionKernel::Auto;
  // SY_CUDA_DENSE_SMALL_M=1 (dense_small_m_enabled_by_env): dense linears of at most
  // kSmallMPieceRows rows through the small-m kernel.
  bool dense_small_m_ = false;
  DecodeBuffers decode_;
  DecodeGraphs graphs_;
  kernels::ExpertWorkspace experts_ws_;
  std::vector<std::int32_t> host_meta_;
  std::vector<float> host_logits_;
  // Before the thread: storage handed out here may be in use on it until it stops.
  CudaActivationOps activations_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<void()>, Completion>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: joined first
};

}  // namespace sy
