// paged_attention_split_cuda: paged_attention_prefill_cuda's mixed batches with more work in
// flight, for decode. The first kernels kept one block per (query row, head) and each warp
// walked its keys one at a time: at batch 1 that is 32 blocks on a 132-SM GPU, each waiting
// out a load's latency per key. Here each warp loads kKeys keys (and their values) before it
// uses any, and when the rows and heads alone make fewer than kTargetBlocks blocks, each row's
// keys are split into up to kMaxSplits ranges, one block each (Flash-Decoding, Dao et al.
// 2023: split the KV sequence, keep a partial softmax per split, merge with a rescale). The
// partials (max, sum, unnormalised output) are merged by a second kernel.
#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kKeys = 4;           // keys one warp has in flight
constexpr int kMaxDimPerLane = 8;  // head_dim ≤ 32 · 8 = 256
constexpr int kMaxDim = 32 * kMaxDimPerLane;
constexpr std::int64_t kTargetBlocks = 512;  // about four per SM of an H100 (132 SMs)
constexpr std::int32_t kMaxSplits = 16;

// exp(m - m_all), 0 for a part that saw no key (m = -inf), whatever m_all is.
__device__ __forceinline__ float part_weight(float m, float m_all) { return m == -INFINITY ? 0.0f : expf(m - m_all); }

__global__ void __launch_bounds__(kWarps * 32)
    split_kernel(const float* __restrict__ q, int n_heads, const std::int32_t* __restrict__ token_seq,
                 const std::int32_t* __restrict__ positions, KvLayerView cache, const std::int32_t* __restrict__ tables,
                 int table_stride, float scale, float* __restrict__ partials, float* __restrict__ out) {
  // Heads of one row are neighbouring blocks (x), so the query heads that share a KV head run
  // together and its K/V rows come from L2 after the first of them.
  const int h = blockIdx.x;
  const long long t = blockIdx.y;
  const int split = blockIdx.z, splits = gridDim.z;
  const int D = cache.head_dim;
  const int g = h / (n_heads / cache.n_kv_heads);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* qh = q + (t * n_heads + h) * D;
  float qr[kMaxDimPerLane], acc[kMaxDimPerLane];
#pragma unroll
  for (int i = 0; i < kMaxDimPerLane; ++i) {
    const int d = lane + 32 * i;
    qr[i] = d < D ? qh[d] : 0.0f;
    acc[i] = 0.0f;
  }
  // This block's keys: range `split` of the row's 0..positions[t], split as evenly as can be.
  const int len = positions[t] + 1;
  const int chunk = (len + splits - 1) / splits;
  const int begin = split * chunk;
  const int end = min(len, begin + chunk);
  const std::int32_t* table = tables + static_cast<long long>(token_seq[t]) * table_stride;
  const long long slot_stride = static_cast<long long>(cache.n_kv_heads) * D;
  const long long head_offset = static_cast<long long>(g) * D;
  float m = -INFINITY, l = 0.0f;
  for (int j0 = begin + warp * kKeys; j0 < end; j0 += kWarps * kKeys) {
    // Every load of the kKeys keys and values first (a key past the range reads as zeros);
    // j0 < end, so key j0 is real and the new maximum below is finite.
    float kv[kKeys][kMaxDimPerLane], vv[kKeys][kMaxDimPerLane];
#pragma unroll
    for (int u = 0; u < kKeys; ++u) {
      const int j = j0 + u;
      const float* k = nullptr;
      const float* v = nullptr;
      if (j < end) {
        const long long slot =
            static_cast<long long>(table[j / cache.page_size]) * cache.page_size + j % cache.page_size;
        k = cache.k + slot * slot_stride + head_offset;
        v = cache.v + slot * slot_stride + head_offset;
      }
#pragma unroll
      for (int i = 0; i < kMaxDimPerLane; ++i) {
        const int d = lane + 32 * i;
        const bool here = k != nullptr && d < D;
        kv[u][i] = here ? k[d] : 0.0f;
        vv[u][i] = here ? v[d] : 0.0f;
      }
    }
    float score[kKeys];
    float m_new = m;
#pragma unroll
    for (int u = 0; u < kKeys; ++u) {
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxDimPerLane; ++i) dot += qr[i] * kv[u][i];
      score[u] = detail::warp_sum(dot) * scale;  // every lane takes part, whichever key is real
      if (j0 + u < end) m_new = fmaxf(m_new, score[u]);
    }
    const float correction = expf(m - m_new);  // 0 on the warp's first keys (m = -inf)
    l *= correction;
#pragma unroll
    for (int i = 0; i < kMaxDimPerLane; ++i) acc[i] *= correction;
#pragma unroll
    for (int u = 0; u < kKeys; ++u) {
      if (j0 + u >= end) continue;
      const float p = expf(score[u] - m_new);
      l += p;
#pragma unroll
      for (int i = 0; i < kMaxDimPerLane; ++i) acc[i] += p * vv[u][i];
    }
    m = m_new;
  }
  __shared__ float warp_m[kWarps], warp_l[kWarps];
  __shared__ float warp_acc[kWarps][kMaxDim];
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kMaxDimPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < D) warp_acc[warp][d] = acc[i];
  }
  __syncthreads();
  // The warps' partial softmaxes merged. With one split warp 0 saw key 0, so m_all is finite;
  // with several, a split past a short row's keys saw none and leaves (-inf, 0, zeros).
  float m_all = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, warp_m[w]);
  float weight[kWarps];
  float l_all = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = part_weight(warp_m[w], m_all);
    l_all += warp_l[w] * weight[w];
  }
  if (splits == 1) {
    float* oh = out + (t * n_heads + h) * D;
    for (int d = threadIdx.x; d < D; d += kWarps * 32) {
      float o = 0.0f;
      for (int w = 0; w < kWarps; ++w) o += warp_acc[w][d] * weight[w];
      oh[d] = o / l_all;
    }
    return;
  }
  float* part = partials + ((t * n_heads + h) * splits + split) * (D + 2);
  if (threadIdx.x == 0) {
    part[0] = m_all;
    part[1] = l_all;
  }
  for (int d = threadIdx.x; d < D; d += kWarps * 32) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) o += warp_acc[w][d] * weight[w];
    part[2 + d] = o;
  }
}

// out[t, h] = Σ_s w_s · acc_s / Σ_s w_s · l_s over the splits' partials, w_s = exp(m_s - max m).
// Split 0 holds key 0 of every row, so the maximum is finite.
__global__ void __launch_bounds__(kWarps * 32)
    merge_kernel(const float* __restrict__ partials, int n_heads, int D, int splits, float* __restrict__ out) {
  const int h = blockIdx.x;
  const long long t = blockIdx.y;
  const float* part = partials + (t * n_heads + h) * splits * static_cast<long long>(D + 2);
  float m_all = -INFINITY;
  for (int s = 0; s < splits; ++s) m_all = fmaxf(m_all, part[s * (D + 2)]);
  float l_all = 0.0f;
  for (int s = 0; s < splits; ++s) l_all += part[s * (D + 2) + 1] * part_weight(part[s * (D + 2)], m_all);
  float* oh = out + (t * n_heads + h) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.0f;
    for (int s = 0; s < splits; ++s) o += part[s * (D + 2) + 2 + d] * part_weight(part[s * (D + 2)], m_all);
    oh[d] = o / l_all;
  }
}

}  // namespace

std::int32_t attention_splits(std::int64_t n_tokens, std::int32_t n_heads) {
  const std::int64_t blocks = n_tokens * n_heads;
  if (blocks <= 0 || blocks >= kTargetBlocks) return 1;
  const std::int64_t splits = (kTargetBlocks + blocks - 1) / blocks;
  return static_cast<std::int32_t>(splits < kMaxSplits ? splits : kMaxSplits);
}

std::int64_t attention_split_floats(std::int64_t n_tokens, std::int32_t n_heads, std::int32_t head_dim) {
  const std::int32_t splits = attention_splits(n_tokens, n_heads);
  return splits == 1 ? 0 : n_tokens * n_heads * splits * (static_cast<std::int64_t>(head_dim) + 2);
}

Status paged_attention_split_cuda(const float* q, std::int64_t n_tokens, std::int32_t n_heads,
                                  const std::int32_t* token_seq, const std::int32_t* positions,
                                  const KvLayerView& cache, const std::int32_t* block_tables,
                                  std::int32_t table_stride, float scale, float* partials, float* out,
                                  cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(cache.head_dim > 0 && cache.head_dim <= kMaxDim,
                                     "paged_attention_split_cuda: head_dim must be 1..256"));
  SY_RETURN_IF_ERROR(detail::require(cache.n_kv_heads > 0 && n_heads > 0 && n_heads % cache.n_kv_heads == 0,
                                     "paged_attention_split_cuda: n_heads must be a multiple of n_kv_heads"));
  SY_RETURN_IF_ERROR(detail::require(cache.page_size > 0 && n_tokens >= 0 && n_tokens <= INT_MAX,
                                     "paged_attention_split_cuda: bad shape"));
  const std::int32_t splits = attention_splits(n_tokens, n_heads);
  SY_RETURN_IF_ERROR(detail::require(splits == 1 || partials != nullptr,
                                     "paged_attention_split_cuda: no partials buffer for a split launch"));
  // gridDim.y is at most 65535: longer batches go in slices of rows (one split each: a batch
  // that long fills the GPU without splitting).
  constexpr std::int64_t kMaxRows = 65535;
  const std::int64_t width = static_cast<std::int64_t>(n_heads) * cache.head_dim;
  const std::int64_t part_width = static_cast<std::int64_t>(n_heads) * splits * (cache.head_dim + 2);
  for (std::int64_t t0 = 0; t0 < n_tokens; t0 += kMaxRows) {
    const std::int64_t rows = n_tokens - t0 < kMaxRows ? n_tokens - t0 : kMaxRows;
    float* part = splits == 1 ? nullptr : partials + t0 * part_width;
    const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>(rows), static_cast<unsigned>(splits));
    split_kernel<<<grid, kWarps * 32, 0, stream>>>(q + t0 * width, n_heads, token_seq + t0, positions + t0, cache,
                                                   block_tables, table_stride, scale, part, out + t0 * width);
    SY_RETURN_IF_ERROR(detail::check_launch("paged_attention_split_cuda"));
    if (splits > 1) {
      merge_kernel<<<dim3(static_cast<unsigned>(n_heads), static_cast<unsigned>(rows)), kWarps * 32, 0, stream>>>(
          part, n_heads, cache.head_dim, splits, out + t0 * width);
      SY_RETURN_IF_ERROR(detail::check_launch("paged_attention_split_cuda (merge)"));
    }
  }
  return Status::Ok();
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_attention_split_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(split_kernel), SY_KERNEL_ENTRY(merge_kernel)});
}

}  // namespace sy::kernels
