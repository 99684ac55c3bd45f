// Host API of the CUDA kernels: plain C++ functions over device pointers, queued on a stream.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/paged_attention.h"

// Each function mirrors the CPU kernel of the same name in kernels/cpu (same layouts, same
// semantics) so the cuda backend can be checked against the cpu backend. All pointers are
// device pointers unless stated; work is asynchronous on `stream`. Invalid arguments and
// launch failures come back as a Status naming the kernel and the CUDA error.
namespace sy::kernels {

// True when at least one CUDA device can be used. Any error from the runtime (no driver, error
// 35 "insufficient driver" on machines without a GPU, no device) means false.
bool cuda_device_available();

// Why no CUDA device can be used (the runtime's error text, e.g. "CUDA driver version is
// insufficient for CUDA runtime version", or "no CUDA device present"); empty when one can.
std::string cuda_device_problem();

// NCCL's version code (e.g. 22809 for 2.28.9); works without a GPU.
StatusOr<int> nccl_version();

// rmsnorm (kernels/cpu/rmsnorm.h): `weight` is a device array of dim elements in weight_type.
Status rmsnorm_cuda(const float* x, const void* weight, DType weight_type, float eps, std::int64_t rows,
                  std::int64_t dim, float* y, cudaStream_t stream);

// Rope::apply (kernels/cpu/rope.h): inv_freq is a device copy of Rope::inv_freq() (head_dim/2
// floats), positions a device array of n_tokens, attention_scaling Rope::attention_scaling().
Status rope_cuda(float* x, std::int64_t n_tokens, std::int32_t n_heads, std::int32_t head_dim, const float* inv_freq,
               const std::int32_t* positions, float attention_scaling, cudaStream_t stream);

// Decode attention for n_seqs sequences, one query each: q and out are [n_seqs, n_heads,
// head_dim]; sequence s attends to its cached positions 0..positions[s] through block table
// block_tables[s · table_stride ...] over the page layout of KvLayerView (k and v are device
// pools). Matches paged_attention (kernels/cpu/paged_attention.h) with n_tokens = 1.
// head_dim must be at most 256.
Status paged_attention_decode_cuda(const float* q, std::int32_t n_seqs, std::int32_t n_heads,
                                 const std::int32_t* positions, const KvLayerView& cache,
                                 const std::int32_t* block_tables, std::int32_t table_stride, float scale,
                                 float* out, cudaStream_t stream);

// silu_mul (kernels/cpu/swiglu.h): h = silu(g) · u. h may alias g or u.
Status silu_mul_cuda(const float* g, const float* u, float* h, std::int64_t n, cudaStream_t stream);

// router_topk (kernels/cpu/router.h); n_experts at most 256.
Status router_topk_cuda(const float* logits, std::int64_t n_tokens, std::int32_t n_experts, std::int32_t k,
                      bool renormalize, std::int32_t* expert_ids, float* weights, cudaStream_t stream);

// argmax (kernels/cpu/sampling.h) of each of `rows` rows of `vocab` logits into out[rows].
Status argmax_cuda(const float* logits, std::int64_t rows, std::int32_t vocab, std::int32_t* out, cudaStream_t stream);

// float32 → bfloat16, rounding to nearest even like f32_to_bf16 (activations for linear_bf16_cuda).
Status f32_to_bf16_cuda(const float* src, std::uint16_t* dst, std::int64_t n, cudaStream_t stream);

// linear (kernels/cpu/gemm.h) for bf16 activations and weights through cuBLAS, float32
// accumulation and output: y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias[N]) (+ y when accumulate).
Status linear_bf16_cuda(cublasHandle_t handle, const std::uint16_t* x, std::int64_t M, const std::uint16_t* w,
                      std::int64_t N, std::int64_t K, const float* bias, float* y, bool accumulate,
                      cudaStream_t stream);

// ---- whole-model pieces (engine/cuda) ----

// linear_bf16_cuda for weights and activations of `type` (bf16, f16 or f32; x converted by
// convert_from_f32_cuda), float32 accumulation and output.
Status linear_cuda(cublasHandle_t handle, const void* x, DType type, std::int64_t M, const void* w, std::int64_t N,
                   std::int64_t K, const float* bias, float* y, bool accumulate, cudaStream_t stream);

// Row copies between any float rows of this GPU: dst_rows[i][0..width) = src_rows[i][..]. Both
// pointer arrays are device arrays; the activation operations (gather, append, scatter) of
// a whole batch are one launch.
Status copy_rows_cuda(const float* const* src_rows, float* const* dst_rows, std::int64_t n, std::int64_t width,
                      cudaStream_t stream);

// ModelOps::embed: out[n, cols] = table[tokens[i]] widened to float32; table is [rows, cols]
// in `type`. Token ids outside [0, rows) produce zero rows (the engine checks ids first).
Status embedding_cuda(const void* table, DType type, std::int64_t rows, std::int64_t cols,
                      const std::int32_t* tokens, std::int64_t n, float* out, cudaStream_t stream);

// kv_cache_write (kernels/cpu/paged_attention.h) for a mixed batch in one launch: token t
// belongs to sequence token_seq[t] (its block table is block_tables + token_seq[t] ·
// table_stride) and sits at positions[t]. k and v are [n_tokens, n_kv_heads, head_dim].
Status kv_cache_write_cuda(const KvLayerView& cache, const std::int32_t* block_tables, std::int32_t table_stride,
                           const std::int32_t* token_seq, const std::int32_t* positions, std::int64_t n_tokens,
                           const float* k, const float* v, cudaStream_t stream);

// paged_attention (kernels/cpu/paged_attention.h) for a mixed batch of prefill chunks and
// decodes in one launch: query row t (q is [n_tokens, n_heads, head_dim]) of sequence
// token_seq[t] at positions[t] attends causally to that sequence's cached positions
// 0..positions[t] (written before, e.g. by kv_cache_write_cuda). Flash-style: keys are
// streamed with an online softmax, so no score matrix exists at any length. head_dim ≤ 256.
Status paged_attention_prefill_cuda(const float* q, std::int64_t n_tokens, std::int32_t n_heads,
                                    const std::int32_t* token_seq, const std::int32_t* positions,
                                    const KvLayerView& cache, const std::int32_t* block_tables,
                                    std::int32_t table_stride, float scale, float* out, cudaStream_t stream);

// paged_attention_prefill_cuda's batches and results (up to float rounding), with more of each
// row's keys in flight: each warp loads four keys at once, and where rows × heads make fewer
// than 512 blocks (decode at small batches), each row's keys are split into up to 16 ranges
// whose partial softmaxes a second launch merges (Flash-Decoding). `partials` holds
// attention_split_floats(n_tokens, n_heads, head_dim) floats (may be null when that is 0).
// The launch shape depends on n_tokens and n_heads only, so it is capturable in a graph.
Status paged_attention_split_cuda(const float* q, std::int64_t n_tokens, std::int32_t n_heads,
                                  const std::int32_t* token_seq, const std::int32_t* positions,
                                  const KvLayerView& cache, const std::int32_t* block_tables,
                                  std::int32_t table_stride, float scale, float* partials, float* out,
                                  cudaStream_t stream);
// The ranges each row's keys are split into, and the partials' floats, for such a launch.
std::int32_t attention_splits(std::int64_t n_tokens, std::int32_t n_heads);
std::int64_t attention_split_floats(std::int64_t n_tokens, std::int32_t n_heads, std::int32_t head_dim);

// paged_attention_split_cuda's results with one block per KV head (not per query head) and
// row and split: a tile of keys and values read once serves every query head of the group, so
// GQA decode reads the cache once instead of once per query head. Splits as the split kernel
// with n_tokens × n_kv_heads blocks; `partials` holds attention_gqa_floats floats. For query
// heads per KV head of 2, 4, 8 or 16 and (heads per KV head) × head_dim ≤ 2048
// (attention_gqa_supported); capturable in a graph.
Status paged_attention_gqa_cuda(const float* q, std::int64_t n_tokens, std::int32_t n_heads,
                                const std::int32_t* token_seq, const std::int32_t* positions,
                                const KvLayerView& cache, const std::int32_t* block_tables, std::int32_t table_stride,
                                float scale, float* partials, float* out, cudaStream_t stream);
bool attention_gqa_supported(std::int32_t n_heads, std::int32_t n_kv_heads, std::int32_t head_dim);
std::int64_t attention_gqa_floats(std::int64_t n_tokens, std::int32_t n_heads, std::int32_t n_kv_heads,
                                  std::int32_t head_dim);

// float32 → `type` (bf16 or f16 round to nearest even as convert_from_f32; f32 copies).
Status convert_from_f32_cuda(const float* src, void* dst, DType type, std::int64_t n, cudaStream_t stream);

// One problem of a grouped linear: y[m, N] = x[m, K] · W[N, K]ᵀ, x in the weight's type (see
// convert_from_f32_cuda), y float32. m may be 0 (the problem is skipped).
struct GroupedLinearProblem {
  const void* x = nullptr;
  const void* w = nullptr;
  float* y = nullptr;
  std::int64_t m = 0;
};

// Which way a grouped call ran (the last call on a workspace; tests and benchmarks print it).
enum class GroupedRoute : std::uint8_t {
  kNone,              // no call yet, or no problem had rows
  kSmallM,            // our small-m kernel (grouped_small_m.cu), one launch per grouped GEMM
  kCublasGrouped,     // cublasGemmGroupedBatchedEx, one call per grouped GEMM
  kCublasPerProblem,  // cuBLAS refused the grouped call for the types: one cublasGemmEx each
  kTensorCore,        // our tensor-core kernel (grouped_tensor_core.cu), one launch per grouped GEMM
};

// Device arrays that a grouped GEMM reads (cuBLAS's pointer arrays, the small-m kernel's
// problem table), grown on demand; one per stream.
class GroupedGemmWorkspace {
 public:
  GroupedGemmWorkspace() = default;
  GroupedGemmWorkspace(const GroupedGemmWorkspace&) = delete;
  GroupedGemmWorkspace& operator=(const GroupedGemmWorkspace&) = delete;
  ~GroupedGemmWorkspace();
  // Room for `problems` problems (three pointers each).
  Status reserve(std::int64_t problems);
  const void** device_pointers() const { return pointers_; }
  // Room for a device table of `bytes` bytes (the small-m kernel's problems).
  Status reserve_table(std::size_t bytes);
  void* table() const { return table_; }
  // True once a call had to run the problems one cublasGemmEx each because this cuBLAS
  // refused the grouped call for the types (benchmarks print it).
  bool fell_back = false;
  // false: every call takes the cuBLAS path, whatever m (as SY_CUDA_SMALL_M=0 does for all).
  bool small_m = true;
  // false: never our tensor-core kernel (grouped_tensor_core.h), as SY_CUDA_TENSOR_CORE=0
  // asks for all calls.
  bool tensor_core = true;
  GroupedRoute last_route = GroupedRoute::kNone;

 private:
  const void** pointers_ = nullptr;
  std::int64_t capacity_ = 0;
  void* table_ = nullptr;
  std::size_t table_bytes_ = 0;
};

// Every problem with the same N, K and weight type in ONE launch: our tensor-core kernel
// (grouped_tensor_core.h: bf16/f16, N a multiple of 128, K of 32) when the largest problem has
// at least kTensorCoreMinRows rows; else our small-m kernel when every problem has at most
// kSmallMMaxRows rows (kernels/cuda/small_m_plan.h: K a multiple of one 16-byte load, weights
// 16-byte aligned, rows fit in shared memory; not with ws.small_m = false or
// SY_CUDA_SMALL_M=0); else the tensor-core kernel where it can run (not with
// ws.tensor_core = false or SY_CUDA_TENSOR_CORE=0); else one cuBLAS call
// (cublasGemmGroupedBatchedEx, one group per distinct m). Problems with
// m = 0 are skipped. Weights of `type` (bf16, f16 or f32), float32 accumulation and output.
Status grouped_linear_cuda(cublasHandle_t handle, const GroupedLinearProblem* problems, std::int64_t count,
                           std::int64_t N, std::int64_t K, DType type, GroupedGemmWorkspace& ws,
                           cudaStream_t stream);

// One expert's share of a grouped SwiGLU call: x [m, H] float32 rows in, y [m, H] out,
// y = row_scale ⊙ down(silu(x·gateᵀ) ⊙ x·upᵀ) (swiglu_ffn of kernels/cpu/swiglu.h with
// accumulate = false); row_scale may be null. gate and up are [I, H], down [H, I] in `type`.
struct ExpertProblem {
  const float* x = nullptr;
  float* y = nullptr;
  const float* row_scale = nullptr;
  const void* gate = nullptr;
  const void* up = nullptr;
  const void* down = nullptr;
  std::int64_t m = 0;
};

// Scratch of swiglu_experts_cuda, grown on demand (device memory); one per stream.
class ExpertWorkspace {
 public:
  ExpertWorkspace() = default;
  ExpertWorkspace(const ExpertWorkspace&) = delete;
  ExpertWorkspace& operator=(const ExpertWorkspace&) = delete;
  ~ExpertWorkspace();
  Status reserve(std::int64_t rows, std::int64_t hidden, std::int64_t intermediate, std::int64_t problems);
  GroupedGemmWorkspace gemm;
  void* x_low = nullptr;      // [rows, H] activations in the weight type
  float* gate_out = nullptr;  // [rows, I]
  float* up_out = nullptr;    // [rows, I]
  void* h_low = nullptr;      // [rows, I] silu(gate)·up in the weight type
  void* segments = nullptr;   // per-problem row table for the gather/scale kernels
  // Capacities in 4-byte words.
  std::int64_t x_capacity = 0, gate_capacity = 0, up_capacity = 0, h_capacity = 0, segments_capacity = 0;
};

// All experts a worker drains in one execution. With every expert's m within the small-m
// kernel's bound (grouped_linear_cuda), two launches: gate and up of all experts together
// (x rounded on the fly), then down (silu(g)·u rounded on the fly, row weights applied on
// the way out). Otherwise three grouped cuBLAS GEMMs (gate and up together, then down) and
// three small kernels, whatever the number of experts or their row counts.
// ws.gemm.last_route says which ran.
Status swiglu_experts_cuda(cublasHandle_t handle, const ExpertProblem* problems, std::int64_t count,
                           std::int64_t H, std::int64_t I, DType type, ExpertWorkspace& ws, cudaStream_t stream);

// y[r, 0..width) *= scale[r] for `rows` rows: the row weights swiglu_experts_cuda applies last,
// for an FFN computed by plain linears (the executor's dense and shared FFNs).
Status scale_rows_cuda(float* y, const float* scale, std::int64_t rows, std::int64_t width, cudaStream_t stream);

// x[i] = 1 / (1 + exp(-x[i])) in place: the shared expert's gate (qwen2_moe).
Status sigmoid_cuda(float* x, std::int64_t n, cudaStream_t stream);

// ModelOps::combine: hidden[t] += Σ_k slot_out[t·K + k] (+ shared[t]), summed in slot order
// then the shared row, exactly the CPU's order. shared may be null.
Status combine_cuda(const float* slot_out, const float* shared, std::int64_t n, std::int32_t K, std::int64_t H,
                    float* hidden, cudaStream_t stream);

// Gathers rows: dst[i] = src[rows[i]] for n rows of `width` floats (attention gathers the
// last row of each request for lm_head, the runtime gathers batches).
Status gather_rows_cuda(const float* src, const std::int32_t* rows, std::int64_t n, std::int64_t width, float* dst,
                        cudaStream_t stream);

// Sampler::sample (kernels/cpu/sampling.h) for `rows` rows of logits, one block per row. Row r
// uses params[r] and the uniform draw u[r] = sampling_uniform(position_seed(seed, position))
// the CPU sampler would draw. Greedy (temperature 0) is argmax exactly. With temperature the
// token is the CPU's for the same u except when u·total falls within float rounding of a
// bucket edge (sums are reduced in a different order); with top-k/top-p the kept set is
// sorted on the GPU like the CPU's up to 1024 candidates: a larger top-k or nucleus is drawn
// from the same set of tokens but in token order (a different token for the same u, the same
// distribution). All argument arrays are device arrays.
struct DeviceSamplingParams {
  float temperature = 0.0f;
  float top_p = 1.0f;
  std::int32_t top_k = 0;
  double u = 0.0;
  float min_p = 0.0f;  // SamplingParams::min_p
};
Status sample_cuda(const float* logits, std::int64_t rows, std::int32_t vocab, const DeviceSamplingParams* params,
                   std::int32_t* out, cudaStream_t stream);

// apply_logit_bias then apply_penalties (kernels/cpu/sampling.h) on rows of `vocab` logits, in
// place, with the cpu's roundings: entry i is one token of row `row`, its bias and its
// PenaltyTerm with that row's penalties (a token with a bias only: count 0, repetition 1). One entry per
// distinct (row, token), so no two touch one logit. `entries` is a device array.
struct PenaltyEntry {
  std::int32_t row = 0;
  std::int32_t token = 0;
  float count = 0.0f;  // times the token was sampled (0: only in the prompt)
  float presence = 0.0f;
  float frequency = 0.0f;
  float repetition = 1.0f;
  float bias = 0.0f;  // apply_logit_bias's, added first
};
Status penalize_cuda(float* logits, std::int32_t vocab, const PenaltyEntry* entries, std::int64_t n,
                     cudaStream_t stream);

// Guided decoding: apply_token_mask (kernels/cpu/sampling.h) on n rows of `vocab` logits, in
// place: logits row rows[g] takes mask g, token_mask_words(vocab) words of masks[g · words ...]
// (bit t % 32 of word t / 32 set: allowed; clear: -inf). A bitmask per row (vocab / 8 bytes)
// rather than an entry per disallowed token: a grammar often allows a few tokens of 150 000.
// `rows` and `masks` are device arrays.
constexpr std::int32_t token_mask_words(std::int32_t vocab) { return (vocab + 31) / 32; }
Status mask_logits_cuda(float* logits, std::int32_t vocab, const std::int32_t* rows, const std::uint32_t* masks,
                        std::int64_t n, cudaStream_t stream);

}  // namespace sy::kernels
