// sample_cuda: one 1024-thread block per row. Greedy is argmax. Temperature sampling walks the
// row's inverse CDF in token order by chunked block scans. With top-k/top-p, the 1024
// best-ranked tokens are found by a radix select on order-preserving float keys, sorted in
// shared memory (bitonic), and one thread walks them exactly as Sampler::sample does. Min-p
// keeps the tokens of key at least a bound (weights grow with the logit), found first.
// penalize_cuda: apply_penalties' sparse updates, one thread per (row, token).
// mask_logits_cuda: guided decoding's bitmask, one thread per (guided row, token).
#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kCandidates = kThreads;  // one per thread in the bitonic sort

struct Sum {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  template <class T>
  __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct Min {
  template <class T>
  __device__ T operator()(T a, T b) const { return a < b ? a : b; }
};

// Every thread gets op over all threads' v, combined in the same order in every thread.
template <class T, class Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ T partial[kWarps];
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();  // the previous call's readers are done with `partial`
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  T r = partial[0];
  for (int w = 1; w < kWarps; ++w) r = op(r, partial[w]);
  return r;
}

// Inclusive prefix sum over the block in thread order; `total` gets the block's sum.
template <class T>
__device__ T block_inclusive_scan(T v, T& total) {
  __shared__ T partial[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const T t = __shfl_up_sync(0xffffffffu, v, offset);
    if (lane >= offset) v += t;
  }
  __syncthreads();
  if (lane == 31) partial[warp] = v;
  __syncthreads();
  T prefix = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (w < warp) prefix += partial[w];
    all += partial[w];
  }
  total = all;
  return v + prefix;
}

// torch.argmax's order, as argmax(): NaN first, then larger value, then lower index.
__device__ __forceinline__ bool argmax_before(float a, int ia, float b, int ib) {
  const bool a_nan = isnan(a), b_nan = isnan(b);
  if (a_nan != b_nan) return a_nan;
  if (a_nan || a == b) return ia < ib;
  return a > b;
}

__device__ int block_argmax(const float* row, int vocab) {
  float best = -INFINITY;
  int best_i = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (argmax_before(row[i], i, best, best_i)) {
      best = row[i];
      best_i = i;
    }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, best, offset);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, offset);
    if (argmax_before(o, oi, best, best_i)) {
      best = o;
      best_i = oi;
    }
  }
  __shared__ float wb[kWarps];
  __shared__ int wi[kWarps];
  __syncthreads();
  if (threadIdx.x % 32 == 0) {
    wb[threadIdx.x / 32] = best;
    wi[threadIdx.x / 32] = best_i;
  }
  __syncthreads();
  best = wb[0];
  best_i = wi[0];
  for (int w = 1; w < kWarps; ++w)
    if (argmax_before(wb[w], wi[w], best, best_i)) {
      best = wb[w];
      best_i = wi[w];
    }
  // best_i < vocab always: every index ranks before the (−inf, INT_MAX) start.
  return best_i == INT_MAX ? 0 : best_i;
}

// Order-preserving unsigned key of a logit (NaN counts as −inf, as in the CPU's cut path):
// a > b as floats ⇔ key(a) > key(b).
__device__ __forceinline__ unsigned logit_key(float l) {
  if (isnan(l)) l = -INFINITY;
  if (l == 0.0f) l = 0.0f;  // −0 and +0 are equal logits: one key, so ties go by token
  const unsigned bits = __float_as_uint(l);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

// The CPU's weight(): exp(logit / T − m) in float32 (NaN: 0), widened to double.
__device__ __forceinline__ double weight_of(float l, float T, float m) {
  if (isnan(l)) return 0.0;
  return static_cast<double>(expf(l / T - m));
}

// Largest τ with f(τ) ≥ goal for a non-increasing f over keys, built bit by bit from the top.
template <class F>
__device__ unsigned radix_select(F f_at_least_goal) {
  unsigned tau = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const unsigned cand = tau | (1u << bit);
    if (f_at_least_goal(cand)) tau = cand;
  }
  return tau;
}

// Inverse CDF in token order over the tokens whose key is at least key_min: the first token
// whose running weight exceeds target; the last weighted token when rounding leaves target
// at the top (the CPU's `last`).
__device__ int draw_in_token_order(const float* row, int vocab, float T, float m, unsigned key_min, double target) {
  double base = 0.0;
  int last = 0;
  for (int c = 0; c < vocab; c += kThreads) {
    const int i = c + static_cast<int>(threadIdx.x);
    double w = 0.0;
    if (i < vocab && logit_key(row[i]) >= key_min) w = weight_of(row[i], T, m);
    double chunk_total;
    const double incl = block_inclusive_scan(w, chunk_total) + base;
    const int hit = block_reduce(w > 0.0 && target < incl ? i : INT_MAX, Min());
    if (hit != INT_MAX) return hit;
    last = max(last, block_reduce(w > 0.0 ? i : -1, Max()));
    base += chunk_total;
  }
  return last;
}

__device__ __forceinline__ bool rank_before(unsigned ka, int ta, unsigned kb, int tb) {
  return ka > kb || (ka == kb && ta < tb);
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* __restrict__ logits, int vocab, const DeviceSamplingParams* __restrict__ params,
                  std::int32_t* __restrict__ out) {
  const float* row = logits + static_cast<long long>(blockIdx.x) * vocab;
  const DeviceSamplingParams p = params[blockIdx.x];
  const float T = p.temperature;
  if (!(T > 0.0f)) {
    const int best = block_argmax(row, vocab);
    if (threadIdx.x == 0) out[blockIdx.x] = best;
    return;
  }
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (row[i] > mx) mx = row[i];  // NaN never compares greater, as on the CPU
  mx = block_reduce(mx, Max());
  if (!(mx > -INFINITY)) {
    const int best = block_argmax(row, vocab);
    if (threadIdx.x == 0) out[blockIdx.x] = best;
    return;
  }
  const float m = mx / T;
  const bool cut_k = p.top_k > 0 && p.top_k < vocab;
  const bool cut_p = p.top_p < 1.0f;
  const bool cut_min_p = p.min_p > 0.0f;

  // Min-p's kept set, the tokens of weight ≥ min_p, is every token of key ≥ key_min: the
  // smallest key among them (the most likely token's weight is exactly 1, so there is one).
  unsigned key_min = 0u;
  if (cut_min_p) {
    unsigned k = UINT_MAX;
    for (int i = threadIdx.x; i < vocab; i += kThreads)
      if (weight_of(row[i], T, m) >= static_cast<double>(p.min_p)) k = min(k, logit_key(row[i]));
    key_min = block_reduce(k, Min());
  }
  // Σ weights over the kept vocabulary (the CPU adds in token order; here a tree: last bits differ).
  double part = 0.0;
  int kept_part = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads)
    if (logit_key(row[i]) >= key_min) {
      part += weight_of(row[i], T, m);
      ++kept_part;
    }
  const double all_total = block_reduce(part, Sum());
  const int min_p_kept = block_reduce(kept_part, Sum());
  if (!cut_k && !cut_p) {
    const int tok = draw_in_token_order(row, vocab, T, m, key_min, p.u * all_total);
    if (threadIdx.x == 0) out[blockIdx.x] = tok;
    return;
  }

  // The C best-ranked tokens: τ = the C-th largest key, then every key above τ and the
  // lowest-index ties at τ (ranks break ties towards the lower token).
  const int C = min(kCandidates, vocab);
  auto count_at_least = [&](unsigned k) {
    int c = 0;
    for (int i = threadIdx.x; i < vocab; i += kThreads) c += logit_key(row[i]) >= k ? 1 : 0;
    return block_reduce(c, Sum()) >= C;
  };
  const unsigned tau = radix_select(count_at_least);
  int above = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) above += logit_key(row[i]) > tau ? 1 : 0;
  above = block_reduce(above, Sum());
  const int ties_taken = C - above;

  __shared__ unsigned cand_key[kCandidates];
  __shared__ int cand_tok[kCandidates];
  __shared__ int filled;
  cand_key[threadIdx.x] = 0u;  // below every real key: padding sorts last
  cand_tok[threadIdx.x] = INT_MAX;
  if (threadIdx.x == 0) filled = 0;
  __syncthreads();
  int ties_before = 0;
  for (int c = 0; c < vocab; c += kThreads) {
    const int i = c + static_cast<int>(threadIdx.x);
    const unsigned k = i < vocab ? logit_key(row[i]) : 0u;
    const bool tie = i < vocab && k == tau;
    int ties_in_chunk;
    const int tie_rank = ties_before + block_inclusive_scan(tie ? 1 : 0, ties_in_chunk) - 1;
    if (i < vocab && (k > tau || (tie && tie_rank < ties_taken))) {
      const int slot = atomicAdd(&filled, 1);  // order does not matter: sorted next
      cand_key[slot] = k;
      cand_tok[slot] = i;
    }
    ties_before += ties_in_chunk;
  }
  __syncthreads();
  // Bitonic sort into rank order (best first).
  for (int size = 2; size <= kCandidates; size <<= 1) {
    for (int j = size >> 1; j > 0; j >>= 1) {
      const int i = threadIdx.x, partner = i ^ j;
      if (partner > i) {
        const bool ascending = (i & size) == 0;
        const bool partner_first = rank_before(cand_key[partner], cand_tok[partner], cand_key[i], cand_tok[i]);
        const bool i_first = rank_before(cand_key[i], cand_tok[i], cand_key[partner], cand_tok[partner]);
        if (ascending ? partner_first : i_first) {
          const unsigned tk = cand_key[i];
          const int tt = cand_tok[i];
          cand_key[i] = cand_key[partner];
          cand_tok[i] = cand_tok[partner];
          cand_key[partner] = tk;
          cand_tok[partner] = tt;
        }
      }
      __syncthreads();
    }
  }

  // Sampler::sample's cut path, sequentially over the sorted candidates. `fallback` when the
  // kept set is larger than the candidates.
  __shared__ int result;
  __shared__ int fallback;
  if (threadIdx.x == 0) {
    fallback = 0;
    result = -1;
    int n = min_p_kept;  // the vocabulary without min-p (every key is ≥ 0)
    double kept_total = 0.0;
    if (cut_k) {
      n = min(p.top_k, n);
      if (n > C) {
        fallback = 1;
      } else {
        for (int i = 0; i < n; ++i) kept_total += weight_of(row[cand_tok[i]], T, m);
      }
    } else {
      kept_total = all_total;
    }
    if (!fallback && cut_p) {
      const double threshold = static_cast<double>(p.top_p) * kept_total;
      double acc = 0.0;
      bool reached = false;
      const int scan = min(n, C);
      for (int i = 0; i < scan; ++i) {
        acc += weight_of(row[cand_tok[i]], T, m);
        if (acc >= threshold) {
          n = i + 1;
          reached = true;
          break;
        }
      }
      if (!reached && n > C) fallback = 2;
      kept_total = acc;
    }
    if (!fallback) {
      const double target = p.u * kept_total;
      double acc = 0.0;
      for (int i = 0; i < n && result < 0; ++i) {
        acc += weight_of(row[cand_tok[i]], T, m);
        if (target < acc) result = cand_tok[i];
      }
      if (result < 0) result = cand_tok[n - 1];
    }
  }
  __syncthreads();
  if (!fallback) {
    if (threadIdx.x == 0) out[blockIdx.x] = result;
    return;
  }
  // More than C tokens kept: the kept set by key (top-k: keys ≥ the k-th largest; nucleus:
  // the largest key bound whose mass reaches top_p of the kept mass), drawn in token order.
  // Ties at the bound are all kept.
  unsigned bound = key_min;
  if (cut_k) {
    const int goal = p.top_k;
    bound = max(bound, radix_select([&](unsigned k) {
      int c = 0;
      for (int i = threadIdx.x; i < vocab; i += kThreads) c += logit_key(row[i]) >= k ? 1 : 0;
      return block_reduce(c, Sum()) >= goal;
    }));
  }
  auto mass_from = [&](unsigned k) {
    double s = 0.0;
    for (int i = threadIdx.x; i < vocab; i += kThreads)
      if (logit_key(row[i]) >= k) s += weight_of(row[i], T, m);
    return block_reduce(s, Sum());
  };
  if (cut_p) {
    const double goal = static_cast<double>(p.top_p) * mass_from(bound);
    bound = radix_select([&](unsigned k) { return mass_from(k) >= goal; });
  }
  const int tok = draw_in_token_order(row, vocab, T, m, bound, p.u * mass_from(bound));
  if (threadIdx.x == 0) out[blockIdx.x] = tok;
}

}  // namespace

Status sample_cuda(const float* logits, std::int64_t rows, std::int32_t vocab, const DeviceSamplingParams* params,
                   std::int32_t* out, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(rows >= 0 && rows <= INT_MAX && vocab >= 1, "sample_cuda: bad shape"));
  if (rows == 0) return Status::Ok();
  sample_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, params, out);
  return detail::check_launch("sample_cuda");
}

namespace {

// apply_penalties' float operations, each rounded on its own (no fused multiply-add), so that
// the penalised logits are the cpu's bit for bit.
__global__ void penalize_kernel(float* __restrict__ logits, int vocab, const PenaltyEntry* __restrict__ entries,
                                long long n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const PenaltyEntry e = entries[i];
  float& l = logits[static_cast<long long>(e.row) * vocab + e.token];
  l = __fadd_rn(l, e.bias);
  if (e.repetition != 1.0f) l = l > 0.0f ? __fdiv_rn(l, e.repetition) : __fmul_rn(l, e.repetition);
  if (e.count > 0.0f) {
    l = __fsub_rn(l, __fmul_rn(e.frequency, e.count));
    l = __fsub_rn(l, e.presence);
  }
}

}  // namespace

Status penalize_cuda(float* logits, std::int32_t vocab, const PenaltyEntry* entries, std::int64_t n,
                     cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n >= 0 && vocab >= 1, "penalize_cuda: bad shape"));
  if (n == 0) return Status::Ok();
  constexpr int kPenaltyThreads = 256;
  const auto blocks = static_cast<unsigned>((n + kPenaltyThreads - 1) / kPenaltyThreads);
  penalize_kernel<<<blocks, kPenaltyThreads, 0, stream>>>(logits, vocab, entries, n);
  return detail::check_launch("penalize_cuda");
}

namespace {

__global__ void mask_logits_kernel(float* __restrict__ logits, int vocab, const std::int32_t* __restrict__ rows,
                                   const std::uint32_t* __restrict__ masks, int words, long long n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long long g = i / vocab;
  const int t = static_cast<int>(i - g * vocab);
  if (!(masks[g * words + t / 32] >> (t % 32) & 1u)) logits[static_cast<long long>(rows[g]) * vocab + t] = -INFINITY;
}

}  // namespace

Status mask_logits_cuda(float* logits, std::int32_t vocab, const std::int32_t* rows, const std::uint32_t* masks,
                        std::int64_t n, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n >= 0 && vocab >= 1, "mask_logits_cuda: bad shape"));
  if (n == 0) return Status::Ok();
  constexpr int kMaskThreads = 256;
  const long long total = n * vocab;
  const auto blocks = static_cast<unsigned>((total + kMaskThreads - 1) / kMaskThreads);
  mask_logits_kernel<<<blocks, kMaskThreads, 0, stream>>>(logits, vocab, rows, masks, token_mask_words(vocab), total);
  return detail::check_launch("mask_logits_cuda");
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_sampling_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(),
             {SY_KERNEL_ENTRY(sample_kernel), SY_KERNEL_ENTRY(penalize_kernel), SY_KERNEL_ENTRY(mask_logits_kernel)});
}

}  // namespace sy::kernels
