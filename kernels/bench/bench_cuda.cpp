// bench_cuda: the cuda kernels on a Qwen3-30B-A3B-shaped model with random bf16 weights. One
// table per run: the grouped expert SwiGLU through our small-m kernel next to cuBLAS's grouped
// GEMM (one call per projection), one launch per expert and a dense GEMM of the same rows and
// FLOPs, with GB/s against a measured device copy; then one decoder
// layer as the cuda executor runs it (attention, router, routed experts, merge), scaled to
// the 48 layers plus lm_head and sampling, as tokens/s for prefill 1×512 and decode batches
// 1/32/128 next to the HBM roofline of the weights and KV each step must read; decode also
// with the attention part of each layer replayed from a CUDA graph, as the cuda executor does
// (engine/cuda/decode_graphs.h), side by side with the eager launches; last, each step's layer
// op by op (event pairs around every launch group, and the host's share between them), so a
// run says which op bounds it without a profiler.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/sampling.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/grouped_small_m.h"

namespace {

using sy::Status;
using sy::kernels::DType;

// Qwen3-30B-A3B.
constexpr std::int64_t H = 2048, I = 768, E = 128, K = 8, heads = 32, kv_heads = 4, D = 128, layers = 48,
                       vocab = 151936;

void must(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "bench_cuda: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}
void must(const Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "bench_cuda: %s\n", s.message().c_str());
  std::exit(1);
}

template <class T>
T* device(std::int64_t n) {
  void* p = nullptr;
  must(cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(n, 1)) * sizeof(T)), "cudaMalloc");
  return static_cast<T*>(p);
}

// Random bf16 values in [-0.05, 0.05), made once on the host and tiled over the buffer.
std::uint16_t* random_bf16(std::int64_t n) {
  static std::vector<std::uint16_t> tile = [] {
    std::vector<std::uint16_t> t(1 << 20);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    for (auto& x : t) x = sy::kernels::f32_to_bf16(u(rng));
    return t;
  }();
  auto* p = device<std::uint16_t>(n);
  for (std::int64_t at = 0; at < n; at += static_cast<std::int64_t>(tile.size())) {
    const std::int64_t len = std::min<std::int64_t>(n - at, static_cast<std::int64_t>(tile.size()));
    must(cudaMemcpy(p + at, tile.data(), static_cast<std::size_t>(len) * 2, cudaMemcpyHostToDevice), "upload");
  }
  return p;
}

float* random_f32(std::int64_t n, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> h(static_cast<std::size_t>(n));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(lo, hi);
  for (auto& x : h) x = u(rng);
  auto* p = device<float>(n);
  must(cudaMemcpy(p, h.data(), h.size() * 4, cudaMemcpyHostToDevice), "upload");
  return p;
}

// Median milliseconds of `reps` runs of fn (after one warm-up), timed by events on `s`.
template <class Fn>
double time_ms(cudaStream_t s, Fn&& fn, int reps = 7) {
  cudaEvent_t a, b;
  must(cudaEventCreate(&a), "event");
  must(cudaEventCreate(&b), "event");
  fn();
  must(cudaStreamSynchronize(s), "warm-up");
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    must(cudaEventRecord(a, s), "record");
    fn();
    must(cudaEventRecord(b, s), "record");
    must(cudaEventSynchronize(b), "sync");
    float ms = 0;
    must(cudaEventElapsedTime(&ms, a, b), "elapsed");
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Experts {
  std::vector<const std::uint16_t*> gate, up, down;
};

// Times named ops on one stream with an event pair each, while enabled (never under stream
// capture). Ops of one name add up; the gaps between them are the host's (launch latency,
// synchronisation, its own loops).
class OpTimes {
 public:
  explicit OpTimes(cudaStream_t s) : s_(s) {}
  ~OpTimes() {
    for (auto& m : marks_) {
      cudaEventDestroy(m.a);
      cudaEventDestroy(m.b);
    }
  }
  template <class Fn>
  void op(const char* name, Fn&& fn) {
    if (!enabled_) return fn();
    if (used_ == marks_.size()) {
      Mark m{};
      must(cudaEventCreate(&m.a), "event");
      must(cudaEventCreate(&m.b), "event");
      marks_.push_back(m);
    }
    Mark& m = marks_[used_++];
    m.name = name;
    must(cudaEventRecord(m.a, s_), "record");
    fn();
    must(cudaEventRecord(m.b, s_), "record");
  }
  void start() {
    used_ = 0;
    enabled_ = true;
  }
  // Per op name, milliseconds summed over the marks since start(), in first-seen order.
  std::vector<std::pair<std::string, double>> stop() {
    enabled_ = false;
    must(cudaStreamSynchronize(s_), "op times");
    std::vector<std::pair<std::string, double>> out;
    for (std::size_t i = 0; i < used_; ++i) {
      float ms = 0;
      must(cudaEventElapsedTime(&ms, marks_[i].a, marks_[i].b), "elapsed");
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == marks_[i].name; });
      if (it == out.end()) out.emplace_back(marks_[i].name, ms);
      else it->second += ms;
    }
    return out;
  }

 private:
  struct Mark {
    const char* name;
    cudaEvent_t a, b;
  };
  cudaStream_t s_;
  std::vector<Mark> marks_;
  std::size_t used_ = 0;
  bool enabled_ = false;
};

// Routing of T tokens: K distinct random experts each; rows per expert.
std::vector<std::int64_t> route(std::int64_t T, std::mt19937& rng) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(E), 0);
  std::vector<int> ids(static_cast<std::size_t>(E));
  for (std::int64_t t = 0; t < T; ++t) {
    for (int e = 0; e < E; ++e) ids[static_cast<std::size_t>(e)] = e;
    std::shuffle(ids.begin(), ids.end(), rng);
    for (int k = 0; k < K; ++k) ++rows[static_cast<std::size_t>(ids[static_cast<std::size_t>(k)])];
  }
  return rows;
}

}  // namespace

int main() {
  if (!sy::kernels::cuda_device_available()) {
    std::fprintf(stderr, "bench_cuda: no CUDA device: %s\n", sy::kernels::cuda_device_problem().c_str());
    return 1;
  }
  cudaDeviceProp prop{};
  must(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int clock_khz = 0, bus_bits = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
  const double hbm = 2.0 * clock_khz * 1e3 * bus_bits / 8.0;  // bytes/s (double data rate)
  std::printf("bench_cuda on %s: HBM %.2f TB/s (from memory clock and bus width)\n", prop.name, hbm / 1e12);
  std::printf("model: Qwen3-30B-A3B shape (H %lld, %lld experts of I %lld, top-%lld, %lld layers, vocab %lld), "
              "random bf16 weights\n\n",
              static_cast<long long>(H), static_cast<long long>(E), static_cast<long long>(I),
              static_cast<long long>(K), static_cast<long long>(layers), static_cast<long long>(vocab));

  cudaStream_t s;
  must(cudaStreamCreate(&s), "stream");
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return 1;
  // A workspace of our own, as the executor: cuBLAS must not allocate inside a capture, and
  // eager and graph runs then use the same kernels.
  constexpr std::size_t workspace_bytes = 32ull << 20;
  void* workspace = device<char>(static_cast<std::int64_t>(workspace_bytes));
  if (cublasSetStream(blas, s) != CUBLAS_STATUS_SUCCESS ||
      cublasSetWorkspace(blas, workspace, workspace_bytes) != CUBLAS_STATUS_SUCCESS)
    return 1;
  // One layer's experts (the other layers' are the same bytes again: every step reads them
  // from HBM either way, 1.2 GB being far beyond L2).
  Experts ex;
  for (int e = 0; e < E; ++e) {
    ex.gate.push_back(random_bf16(I * H));
    ex.up.push_back(random_bf16(I * H));
    ex.down.push_back(random_bf16(H * I));
  }
  const std::int64_t expert_bytes = 3 * I * H * 2;
  std::mt19937 rng(3);

  // The copy bandwidth the kernels can hope for: a device-to-device copy of 1 GiB reads and
  // writes it once (GB/s below count the bytes read and written).
  double copy_bw = 0.0;
  {
    const std::int64_t n = 1ll << 30;
    char* a = device<char>(n);
    char* b = device<char>(n);
    const double ms = time_ms(s, [&] { must(cudaMemcpyAsync(b, a, static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice, s), "copy"); }, 5);
    copy_bw = 2.0 * static_cast<double>(n) / (ms * 1e-3);
    cudaFree(a);
    cudaFree(b);
  }
  std::printf("device-to-device copy: %.0f GB/s (read + write)\n\n", copy_bw / 1e9);

  // Every route from one run: our small-m kernel (two launches), cuBLAS's grouped GEMM (or
  // its one-GemmEx-per-expert fallback) with the small-m route switched off, one launch
  // sequence per expert, a dense cuBLAS SwiGLU of all rows through one expert: the same
  // FLOPs with one expert's weights read, and our tensor-core kernel (every m, small-m off).
  std::printf("grouped expert SwiGLU: small-m kernel vs cuBLAS vs our tensor-core kernel (gate+up, silu, down, scale)\n");
  std::printf("%6s %6s %7s %5s | %9s %9s %9s %9s %9s | %8s %8s %8s %6s | %7s %7s %7s\n", "tokens", "rows", "experts",
              "max m", "small-m", "cuBLAS", "per-exp", "dense", "tensor", "sm GB/s", "cB GB/s", "tc GB/s", "of cp",
              "cB/sm", "dn/sm", "cB/tc");
  sy::kernels::ExpertWorkspace ws_small, ws_grouped, ws_loop, ws_dense, ws_tc;
  ws_tc.gemm.small_m = false;
  for (sy::kernels::ExpertWorkspace* w : {&ws_small, &ws_grouped, &ws_loop, &ws_dense}) w->gemm.tensor_core = false;
  ws_grouped.gemm.small_m = false;
  ws_loop.gemm.small_m = false;
  ws_dense.gemm.small_m = false;
  for (const std::int64_t T : {1, 32, 128, 512}) {
    const std::vector<std::int64_t> rows = route(T, rng);
    const std::int64_t R = T * K;
    float* x = random_f32(R * H);
    float* y = device<float>(R * H);
    float* scale = random_f32(R, 0.0f, 1.0f);
    std::vector<sy::kernels::ExpertProblem> problems;
    std::int64_t at = 0, active = 0, max_m = 0;
    for (int e = 0; e < E; ++e) {
      const std::int64_t m = rows[static_cast<std::size_t>(e)];
      problems.push_back({x + at * H, y + at * H, scale + at, ex.gate[static_cast<std::size_t>(e)],
                          ex.up[static_cast<std::size_t>(e)], ex.down[static_cast<std::size_t>(e)], m});
      at += m;
      active += m > 0 ? 1 : 0;
      max_m = std::max(max_m, m);
    }
    const double small = time_ms(s, [&] {
      must(sy::kernels::swiglu_experts_cuda(blas, problems.data(), E, H, I, DType::BF16, ws_small, s));
    });
    const bool small_ran = ws_small.gemm.last_route == sy::kernels::GroupedRoute::kSmallM;
    const double grouped = time_ms(s, [&] {
      must(sy::kernels::swiglu_experts_cuda(blas, problems.data(), E, H, I, DType::BF16, ws_grouped, s));
    });
    const double loop = time_ms(s, [&] {
      for (const auto& p : problems)
        if (p.m > 0) must(sy::kernels::swiglu_experts_cuda(blas, &p, 1, H, I, DType::BF16, ws_loop, s));
    });
    const sy::kernels::ExpertProblem dense{x, y, scale, ex.gate[0], ex.up[0], ex.down[0], R};
    const double one = time_ms(s, [&] { must(sy::kernels::swiglu_experts_cuda(blas, &dense, 1, H, I, DType::BF16, ws_dense, s)); });
    const double tc = time_ms(s, [&] {
      must(sy::kernels::swiglu_experts_cuda(blas, problems.data(), E, H, I, DType::BF16, ws_tc, s));
    });
    const bool tc_ran = ws_tc.gemm.last_route == sy::kernels::GroupedRoute::kTensorCore;
    // Bytes the experts must move at least: their weights, x and y, gate and up out and in.
    const double bytes = static_cast<double>(active * expert_bytes) + 4.0 * static_cast<double>(R) * (2.0 * H + 4.0 * I);
    std::printf("%6lld %6lld %7lld %5lld | %7.3fms %7.3fms %7.3fms %7.3fms %7.3fms | %8.0f %8.0f %8.0f %5.0f%% | %6.2fx "
                "%6.2fx %6.2fx%s%s\n",
                static_cast<long long>(T), static_cast<long long>(R), static_cast<long long>(active),
                static_cast<long long>(max_m), small, grouped, loop, one, tc, bytes / small / 1e6, bytes / grouped / 1e6,
                bytes / tc / 1e6, 100.0 * bytes / (small * 1e-3) / copy_bw, grouped / small, one / small, grouped / tc,
                small_ran ? "" : "  (small-m declined: cuBLAS ran in its column too)",
                tc_ran ? "" : "  (the tensor-core kernel declined: cuBLAS ran in its column)");
    cudaFree(x);
    cudaFree(y);
    cudaFree(scale);
  }
  std::printf("  (GB/s: weights of the experts hit plus activations, over the time; of cp: small-m's share of the "
              "copy bandwidth; cB/sm: cuBLAS time over small-m's, dn/sm: dense cuBLAS at equal FLOPs over small-m's: "
              "issue 13 asks >= 0.85; cB/tc: cuBLAS time over the tensor-core kernel's)%s\n\n",
              ws_grouped.gemm.fell_back ? "\n  NOTE: cuBLAS refused the grouped call for bf16→f32; its column ran one "
                                          "GemmEx per problem"
                                        : "");

  // ---- one decoder layer as CudaExecutor::run_attention + run_experts + run_merge ----
  const std::int64_t qw = heads * D, kvw = kv_heads * D;
  const std::int64_t page = 16, ctx = 512, max_seqs = 128;
  const std::int64_t pages = max_seqs * (ctx / page + 1);
  auto* wq = random_bf16(qw * H);
  auto* wk = random_bf16(kvw * H);
  auto* wv = random_bf16(kvw * H);
  auto* wo = random_bf16(H * qw);
  auto* wr = random_bf16(E * H);
  auto* norm = random_bf16(H);
  auto* qn = random_bf16(D);
  auto* lm = random_bf16(vocab * H);
  float* kc = random_f32(pages * page * kvw);
  float* vc = random_f32(pages * page * kvw);
  std::vector<float> freq(static_cast<std::size_t>(D / 2));
  for (std::int64_t i = 0; i < D / 2; ++i) freq[static_cast<std::size_t>(i)] = static_cast<float>(1.0 / std::pow(1e6, 2.0 * static_cast<double>(i) / static_cast<double>(D)));
  float* inv_freq = device<float>(D / 2);
  must(cudaMemcpy(inv_freq, freq.data(), freq.size() * 4, cudaMemcpyHostToDevice), "upload");
  const sy::kernels::KvLayerView view{kc, vc, static_cast<std::int32_t>(pages), static_cast<std::int32_t>(page),
                                      static_cast<std::int32_t>(kv_heads), static_cast<std::int32_t>(D)};
  const std::int64_t max_rows = 512;
  float* hidden = random_f32(max_rows * H);
  float* normed = device<float>(max_rows * H);
  void* low = device<float>(max_rows * qw);
  float* q = device<float>(max_rows * qw);
  float* k = device<float>(max_rows * kvw);
  float* v = device<float>(max_rows * kvw);
  float* attn = device<float>(max_rows * qw);
  float* logits = device<float>(std::max(max_rows * E, max_seqs * vocab));
  auto* ids = device<std::int32_t>(max_rows * K);
  auto* wts = device<float>(max_rows * K);
  // The experts below run in place on these rows, step after step, with no norm in between
  // (a SwiGLU's output grows with the square of its input): from zeros they stay finite; from
  // whatever an earlier buffer left in this memory they may grow to inf and NaN, which the
  // combine carries into `hidden` and the router into NaN logits.
  float* slots = device<float>(max_rows * K * H);
  must(cudaMemset(slots, 0, static_cast<std::size_t>(max_rows * K * H) * sizeof(float)), "cudaMemset");
  auto* meta = device<std::int32_t>(4 * max_rows + max_seqs * (ctx / page + 1));
  auto* params = device<sy::kernels::DeviceSamplingParams>(max_seqs);
  auto* next = device<std::int32_t>(max_seqs);
  sy::kernels::ExpertWorkspace ws;
  std::vector<std::int32_t> host_ids(static_cast<std::size_t>(max_rows * K));

  // One step of n rows over n_seqs sequences (decode: n = n_seqs, each at position ctx-1;
  // prefill: one sequence, positions 0..n-1). Metadata first (from the host, so not in a
  // graph), then the attention part (capturable: what a decode graph holds), then the
  // routed experts (eager, as in the executor: their row counts come back to the host).
  const std::int64_t stride = ctx / page + 1;
  auto upload_meta = [&](std::int64_t n, std::int64_t n_seqs, bool prefill) {
    std::vector<std::int32_t> m(static_cast<std::size_t>(2 * n + n_seqs * stride));
    for (std::int64_t t = 0; t < n; ++t) {
      m[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(prefill ? 0 : t);
      m[static_cast<std::size_t>(n + t)] = static_cast<std::int32_t>(prefill ? t : ctx - 1);
    }
    for (std::int64_t i = 0; i < n_seqs * stride; ++i) m[static_cast<std::size_t>(2 * n + i)] = static_cast<std::int32_t>(i % pages);
    must(cudaMemcpyAsync(meta, m.data(), m.size() * 4, cudaMemcpyHostToDevice, s), "meta");
  };
  OpTimes ops(s);
  // The split and grouped kernels' partial softmaxes, for the most rows that still split (every step below
  // has 1, 32, 128 or 512 rows).
  std::int64_t partial_floats = 0;
  for (const std::int64_t n : {1, 32, 128, 512}) {
    partial_floats = std::max(partial_floats, sy::kernels::attention_split_floats(n, static_cast<std::int32_t>(heads),
                                                                                  static_cast<std::int32_t>(D)));
    partial_floats = std::max(partial_floats,
                              sy::kernels::attention_gqa_floats(n, static_cast<std::int32_t>(heads),
                                                                static_cast<std::int32_t>(kv_heads), static_cast<std::int32_t>(D)));
  }
  float* partials = device<float>(partial_floats);
  // SY_CUDA_DENSE_SMALL_M=1's path, as CudaExecutor::dense_linears takes it: the dense linears of
  // up to kSmallMPieceRows rows through the small-m kernel, x rounded in it (no conversion launch).
  bool dense = false;
  // True when the small-m kernel took the call (dense on and the plan fits).
  auto dense_linears = [&](const float* x, std::int64_t n, std::int64_t Kd,
                           std::initializer_list<sy::kernels::DenseSmallMOutput> outs, bool acc) {
    if (!dense || n > sy::kernels::kSmallMPieceRows) return false;
    sy::kernels::DenseSmallMPlan plan;
    must(sy::kernels::plan_dense_small_m_for(n, Kd, DType::BF16, outs.begin(), static_cast<int>(outs.size()), plan));
    if (!plan.use) return false;
    must(sy::kernels::dense_small_m_cuda(plan, x, nullptr, nullptr, n, Kd, DType::BF16, outs.begin(),
                                         static_cast<int>(outs.size()), acc, s));
    return true;
  };
  // Attention as the executor runs it by default (SY_CUDA_ATTENTION=auto): the grouped kernel
  // for a prompt and for decode from 32 rows, the split kernel for fewer decode rows.
  auto attention_part = [&](std::int64_t n, bool prefill) {
    const std::int32_t* seq = meta;
    const std::int32_t* pos = meta + n;
    const std::int32_t* tables = meta + 2 * n;
    // The input's conversion to bf16 and the cuBLAS GEMM, timed apart; q, k and v convert their
    // common input once, as the executor does (CudaExecutor::linears).
    auto convert = [&](const float* x, std::int64_t Kd) {
      ops.op("convert to bf16", [&] { must(sy::kernels::convert_from_f32_cuda(x, low, DType::BF16, n * Kd, s)); });
    };
    auto gemm = [&](const char* name, const std::uint16_t* w, std::int64_t N, std::int64_t Kd, float* out, bool acc) {
      ops.op(name, [&] { must(sy::kernels::linear_cuda(blas, low, DType::BF16, n, w, N, Kd, nullptr, out, acc, s)); });
    };
    auto lin = [&](const char* name, const char* dense_name, const float* x, const std::uint16_t* w, std::int64_t N,
                   std::int64_t Kd, float* out, bool acc) {
      bool ran = false;
      if (dense && n <= sy::kernels::kSmallMPieceRows)
        ops.op(dense_name, [&] { ran = dense_linears(x, n, Kd, {{w, nullptr, out, N}}, acc); });
      if (ran) return;
      convert(x, Kd);
      gemm(name, w, N, Kd, out, acc);
    };
    ops.op("rmsnorm", [&] { must(sy::kernels::rmsnorm_cuda(hidden, norm, DType::BF16, 1e-6f, n, H, normed, s)); });
    bool qkv_dense = false;
    if (dense && n <= sy::kernels::kSmallMPieceRows) ops.op("q/k/v_proj (small-m)", [&] {
      qkv_dense = dense_linears(normed, n, H, {{wq, nullptr, q, qw}, {wk, nullptr, k, kvw}, {wv, nullptr, v, kvw}}, false);
    });
    if (!qkv_dense) {
      convert(normed, H);
      gemm("q/k/v_proj (cuBLAS)", wq, qw, H, q, false);
      gemm("q/k/v_proj (cuBLAS)", wk, kvw, H, k, false);
      gemm("q/k/v_proj (cuBLAS)", wv, kvw, H, v, false);
    }
    ops.op("q/k norm", [&] {
      must(sy::kernels::rmsnorm_cuda(q, qn, DType::BF16, 1e-6f, n * heads, D, q, s));
      must(sy::kernels::rmsnorm_cuda(k, qn, DType::BF16, 1e-6f, n * kv_heads, D, k, s));
    });
    ops.op("rope", [&] {
      must(sy::kernels::rope_cuda(q, n, heads, D, inv_freq, pos, 1.0f, s));
      must(sy::kernels::rope_cuda(k, n, kv_heads, D, inv_freq, pos, 1.0f, s));
    });
    ops.op("kv cache write", [&] {
      must(sy::kernels::kv_cache_write_cuda(view, tables, static_cast<std::int32_t>(stride), seq, pos, n, k, v, s));
    });
    ops.op("paged attention", [&] {
      if (prefill || n >= 32) {
        must(sy::kernels::paged_attention_gqa_cuda(q, n, heads, seq, pos, view, tables,
                                                   static_cast<std::int32_t>(stride), 0.088f, partials, attn, s));
      } else {
        must(sy::kernels::paged_attention_split_cuda(q, n, heads, seq, pos, view, tables,
                                                     static_cast<std::int32_t>(stride), 0.088f, partials, attn, s));
      }
    });
    lin("o_proj (cuBLAS)", "o_proj (small-m)", attn, wo, H, qw, hidden, true);
    ops.op("rmsnorm", [&] { must(sy::kernels::rmsnorm_cuda(hidden, norm, DType::BF16, 1e-6f, n, H, normed, s)); });
    lin("router (cuBLAS)", "router (small-m)", normed, wr, E, H, logits, false);
    ops.op("router top-k", [&] { must(sy::kernels::router_topk_cuda(logits, n, E, K, true, ids, wts, s)); });
  };
  auto expert_part = [&](std::int64_t n) {
    // The runtime groups rows by expert on the host (routing comes back, rows go out again).
    ops.op("routing to host", [&] {
      must(cudaMemcpyAsync(host_ids.data(), ids, static_cast<std::size_t>(n * K) * 4, cudaMemcpyDeviceToHost, s), "ids");
    });
    must(cudaStreamSynchronize(s), "ids");
    std::vector<std::int64_t> rows(static_cast<std::size_t>(E), 0);
    for (std::int64_t i = 0; i < n * K; ++i) ++rows[static_cast<std::size_t>(host_ids[static_cast<std::size_t>(i)])];
    std::vector<sy::kernels::ExpertProblem> problems;
    std::int64_t at = 0;
    for (int e = 0; e < E; ++e) {
      const std::int64_t r = rows[static_cast<std::size_t>(e)];
      problems.push_back({slots + at * H, slots + at * H, wts + at, ex.gate[static_cast<std::size_t>(e)],
                          ex.up[static_cast<std::size_t>(e)], ex.down[static_cast<std::size_t>(e)], r});
      at += r;
    }
    ops.op("routed experts", [&] { must(sy::kernels::swiglu_experts_cuda(blas, problems.data(), E, H, I, DType::BF16, ws, s)); });
    ops.op("combine", [&] { must(sy::kernels::combine_cuda(slots, nullptr, n, static_cast<std::int32_t>(K), H, hidden, s)); });
  };
  auto layer = [&](std::int64_t n, std::int64_t n_seqs, bool prefill) {
    ops.op("metadata upload", [&] { upload_meta(n, n_seqs, prefill); });
    attention_part(n, prefill);
    expert_part(n);
  };
  // The attention part of a decode step of n rows as a graph (after the eager runs warmed it up).
  auto capture = [&](std::int64_t n) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    must(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    attention_part(n, /*prefill=*/false);
    must(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
    must(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    must(cudaGraphDestroy(graph), "cudaGraphDestroy");
    return exec;
  };
  auto head = [&](std::int64_t n_seqs) {
    std::vector<sy::kernels::DeviceSamplingParams> p(static_cast<std::size_t>(n_seqs), {0.0f, 1.0f, 0, 0.5});
    must(cudaMemcpyAsync(params, p.data(), p.size() * sizeof(p[0]), cudaMemcpyHostToDevice, s), "params");
    must(sy::kernels::rmsnorm_cuda(hidden, norm, DType::BF16, 1e-6f, n_seqs, H, normed, s));
    if (!dense_linears(normed, n_seqs, H, {{lm, nullptr, logits, vocab}}, false)) {
      must(sy::kernels::convert_from_f32_cuda(normed, low, DType::BF16, n_seqs * H, s));
      must(sy::kernels::linear_cuda(blas, low, DType::BF16, n_seqs, lm, vocab, H, nullptr, logits, false, s));
    }
    must(sy::kernels::sample_cuda(logits, n_seqs, static_cast<std::int32_t>(vocab), params, next, s));
  };

  const double attn_weight_bytes = 2.0 * static_cast<double>(qw * H + 2 * kvw * H + H * qw + E * H);
  std::printf("whole model, %lld layers (one layer timed, × %lld) + lm_head and sampling\n",
              static_cast<long long>(layers), static_cast<long long>(layers));
  std::printf("%-14s | %10s %10s | %12s %14s %7s\n", "step", "layer", "step", "tokens/s", "HBM roofline", "of it");
  struct Case {
    const char* name;
    std::int64_t n, seqs;
    bool prefill;
    bool tensor_core = true;  // false: the routed experts past the small-m bound through cuBLAS, as before
    bool dense = false;       // the dense linears through the small-m kernel (SY_CUDA_DENSE_SMALL_M=1)
  };
  struct Decode {
    const Case* c;
    double step_ms, head_ms;
  };
  const Case cases[] = {Case{"prefill 1x512", 512, 1, true}, Case{"prefill cuBLAS", 512, 1, true, false},
                        Case{"decode b=1", 1, 1, false}, Case{"b=1 dense", 1, 1, false, true, true},
                        Case{"decode b=16", 16, 16, false}, Case{"b=16 dense", 16, 16, false, true, true},
                        Case{"decode b=32", 32, 32, false}, Case{"decode b=128", 128, 128, false}};
  std::vector<Decode> decodes;
  for (const Case& c : cases) {
    ws.gemm.tensor_core = c.tensor_core;
    dense = c.dense;
    const double layer_ms = time_ms(s, [&] { layer(c.n, c.seqs, c.prefill); }, 5);
    ws.gemm.tensor_core = true;
    const double head_ms = time_ms(s, [&] { head(c.seqs); }, 5);
    dense = false;
    const double step_ms = layer_ms * layers + head_ms;
    const double tokens = static_cast<double>(c.prefill ? c.n : c.seqs);
    // Bytes a step must read at least: attention and router weights, the experts its rows
    // touch (expected distinct experts of n·K uniform draws), the KV cache, lm_head.
    const double touched = E * (1.0 - std::pow(1.0 - static_cast<double>(K) / E, static_cast<double>(c.n)));
    const double kv = c.prefill ? 0.0 : static_cast<double>(c.seqs * ctx * kvw * 4 * 2);
    const double bytes = layers * (attn_weight_bytes + touched * expert_bytes + kv) + 2.0 * vocab * H;
    const double roofline = tokens / (bytes / hbm);
    std::printf("%-14s | %8.3fms %8.2fms | %12.1f %14.1f %6.0f%%\n", c.name, layer_ms, step_ms, tokens / step_ms * 1e3,
                roofline, 100.0 * (tokens / step_ms * 1e3) / roofline);
    if (!c.prefill) decodes.push_back({&c, step_ms, head_ms});
  }
  std::printf("  (the KV cache is float32, %lld tokens of context per decode sequence; routing is the model's "
              "router on random weights; the routed experts of 16 rows or more through our tensor-core kernel, as the "
              "executor's; prefill cuBLAS: through cuBLAS instead, as before; dense: q/k/v (one launch), o_proj, "
              "router and lm_head through the small-m kernel, SY_CUDA_DENSE_SMALL_M=1)\n\n",
              static_cast<long long>(ctx));
  std::fflush(stdout);

  // Decode again with the attention part of each layer replayed from a CUDA graph (after the
  // runs above warmed its kernels up), the metadata upload and the experts eager, as the
  // executor does; every layer's graph is the same launches, so one stands for all. After
  // the eager table, so that a failing capture cannot cost its numbers.
  std::printf("decode with CUDA graphs (attention part of each layer one graph launch)\n");
  std::printf("%-14s | %12s %12s | %12s %12s | %7s\n", "step", "eager step", "graph step", "eager tok/s", "graph tok/s",
              "speedup");
  for (const Decode& d : decodes) {
    const Case& c = *d.c;
    const double tokens = static_cast<double>(c.seqs);
    dense = c.dense;
    upload_meta(c.n, c.seqs, false);
    cudaGraphExec_t exec = capture(c.n);
    const double graph_layer_ms = time_ms(s, [&] {
      upload_meta(c.n, c.seqs, false);
      must(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
      expert_part(c.n);
    }, 5);
    must(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
    dense = false;
    const double graph_step_ms = graph_layer_ms * layers + d.head_ms;
    std::printf("%-14s | %10.2fms %10.2fms | %12.1f %12.1f | %6.2fx\n", c.name, d.step_ms, graph_step_ms,
                tokens / d.step_ms * 1e3, tokens / graph_step_ms * 1e3, d.step_ms / graph_step_ms);
  }
  std::fflush(stdout);

  // One eager layer of each step op by op: the median layer of five, each op's time inside
  // it and its share; "host" is the layer's time outside every op (the routing's wait and the
  // host's grouping of rows, launch gaps). The events add a few µs per op themselves.
  std::printf("\none layer op by op (eager; ms per layer, share of the layer)\n");
  for (const Case& c : cases) {
    std::vector<std::pair<double, std::vector<std::pair<std::string, double>>>> runs;
    ws.gemm.tensor_core = c.tensor_core;
    dense = c.dense;
    layer(c.n, c.seqs, c.prefill);
    for (int r = 0; r < 5; ++r) {
      cudaEvent_t a, b;
      must(cudaEventCreate(&a), "event");
      must(cudaEventCreate(&b), "event");
      must(cudaStreamSynchronize(s), "sync");
      ops.start();
      must(cudaEventRecord(a, s), "record");
      layer(c.n, c.seqs, c.prefill);
      must(cudaEventRecord(b, s), "record");
      auto times = ops.stop();
      float ms = 0;
      must(cudaEventElapsedTime(&ms, a, b), "elapsed");
      runs.emplace_back(ms, std::move(times));
      cudaEventDestroy(a);
      cudaEventDestroy(b);
    }
    std::sort(runs.begin(), runs.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    const auto& [layer_ms, times] = runs[runs.size() / 2];
    std::printf("%s: %.3f ms\n", c.name, layer_ms);
    double in_ops = 0;
    for (const auto& [name, ms] : times) {
      std::printf("  %-22s %8.3f ms %5.1f%%\n", name.c_str(), ms, 100.0 * ms / layer_ms);
      in_ops += ms;
    }
    std::printf("  %-22s %8.3f ms %5.1f%%\n", "host (between ops)", layer_ms - in_ops, 100.0 * (layer_ms - in_ops) / layer_ms);
  }
  ws.gemm.tensor_core = true;
  dense = false;

  // The attention kernels side by side on each step's rows: paged_attention_prefill_cuda (one
  // block per row and head, one key at a time per warp; the layer's for prompts) and
  // paged_attention_split_cuda (four keys in flight per warp, each row's keys split over blocks
  // when the rows leave the GPU idle; the layer's for decode), which is what the executor's
  // SY_CUDA_ATTENTION=auto choice rests on; and paged_attention_gqa_cuda (a block per KV head:
  // a tile of keys read once for the 8 query heads that share it; SY_CUDA_ATTENTION=gqa).
  std::printf("\npaged attention per layer: prefill kernel vs split kernel vs grouped (GQA) kernel\n");
  std::printf("%-14s | %10s %10s %6s %10s %6s | %7s %7s\n", "step", "prefill", "split", "splits", "gqa", "splits",
              "pf/sp", "sp/gqa");
  for (const Case& c : cases) {
    if (!c.tensor_core || c.dense) continue;  // the same attention as the case before it
    upload_meta(c.n, c.seqs, c.prefill);
    const std::int32_t* seq = meta;
    const std::int32_t* pos = meta + c.n;
    const std::int32_t* tables = meta + 2 * c.n;
    const double rows_ms = time_ms(s, [&] {
      must(sy::kernels::paged_attention_prefill_cuda(q, c.n, heads, seq, pos, view, tables,
                                                     static_cast<std::int32_t>(stride), 0.088f, attn, s));
    });
    const double split_ms = time_ms(s, [&] {
      must(sy::kernels::paged_attention_split_cuda(q, c.n, heads, seq, pos, view, tables,
                                                   static_cast<std::int32_t>(stride), 0.088f, partials, attn, s));
    });
    const double gqa_ms = time_ms(s, [&] {
      must(sy::kernels::paged_attention_gqa_cuda(q, c.n, heads, seq, pos, view, tables,
                                                 static_cast<std::int32_t>(stride), 0.088f, partials, attn, s));
    });
    std::printf("%-14s | %8.3fms %8.3fms %6d %8.3fms %6d | %6.2fx %6.2fx\n", c.name, rows_ms, split_ms,
                sy::kernels::attention_splits(c.n, static_cast<std::int32_t>(heads)), gqa_ms,
                sy::kernels::attention_splits(c.n, static_cast<std::int32_t>(kv_heads)), rows_ms / split_ms,
                split_ms / gqa_ms);
  }
  return 0;
}
