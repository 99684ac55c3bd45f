// paged_attention_prefill_cuda: one block per (query row, head) of a mixed batch; its warps
// split the row's keys 0..position and keep an online softmax each (FlashAttention's
// rescaling, Dao et al. 2022, eq. in §3.1), merged at the end. Keys are streamed from the
// paged cache, so no score row or T×T matrix is ever stored. Deviation from FlashAttention:
// queries are not tiled through shared memory; K/V rows shared by the queries of one
// sequence are reused through L2 instead (simpler, and exact in the same way).
#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxDimPerLane = 8;  // head_dim ≤ 32 · 8 = 256
constexpr int kMaxDim = 32 * kMaxDimPerLane;

__global__ void __launch_bounds__(kWarps * 32)
    prefill_kernel(const float* __restrict__ q, int n_heads, const std::int32_t* __restrict__ token_seq,
                   const std::int32_t* __restrict__ positions, KvLayerView cache,
                   const std::int32_t* __restrict__ tables, int table_stride, float scale, float* __restrict__ out) {
  // Heads of one row are neighbouring blocks (x), so the query heads that share a KV head run
  // together and its K/V rows are read from HBM about once, then from L2.
  const int h = blockIdx.x;
  const long long t = blockIdx.y;
  const int D = cache.head_dim;
  const int g = h / (n_heads / cache.n_kv_heads);  // grouped-query: this head's KV head
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* qh = q + (t * n_heads + h) * D;
  float qr[kMaxDimPerLane], acc[kMaxDimPerLane];
#pragma unroll
  for (int i = 0; i < kMaxDimPerLane; ++i) {
    const int d = lane + 32 * i;
    qr[i] = d < D ? qh[d] : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int len = positions[t] + 1;  // causal: this row sees keys 0..positions[t]
  const std::int32_t* table = tables + static_cast<long long>(token_seq[t]) * table_stride;
  const long long slot_stride = static_cast<long long>(cache.n_kv_heads) * D;
  for (int j = warp; j < len; j += kWarps) {
    const long long slot = static_cast<long long>(table[j / cache.page_size]) * cache.page_size + j % cache.page_size;
    const long long offset = slot * slot_stride + static_cast<long long>(g) * D;
    const float* k = cache.k + offset;
    const float* v = cache.v + offset;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxDimPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < D) dot += qr[i] * k[d];
    }
    const float score = detail::warp_sum(dot) * scale;
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new);  // 0 on the warp's first key (m = -inf)
    const float p = expf(score - m_new);
    l = l * correction + p;
#pragma unroll
    for (int i = 0; i < kMaxDimPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < D) acc[i] = acc[i] * correction + p * v[d];
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
  // Warp 0 always saw key 0, so the merged max is finite; a warp that saw no key (m = -inf,
  // l = 0, acc = 0) gets weight exp(-inf) = 0.
  float m_all = warp_m[0];
  for (int w = 1; w < kWarps; ++w) m_all = fmaxf(m_all, warp_m[w]);
  float weight[kWarps];
  float l_all = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = expf(warp_m[w] - m_all);
    l_all += warp_l[w] * weight[w];
  }
  float* oh = out + (t * n_heads + h) * D;
  for (int d = threadIdx.x; d < D; d += kWarps * 32) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) o += warp_acc[w][d] * weight[w];
    oh[d] = o / l_all;
  }
}

}  // namespace

Status paged_attention_prefill_cuda(const float* q, std::int64_t n_tokens, std::int32_t n_heads,
                                    const std::int32_t* token_seq, const std::int32_t* positions,
                                    const KvLayerView& cache, const std::int32_t* block_tables,
                                    std::int32_t table_stride, float scale, float* out, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(cache.head_dim > 0 && cache.head_dim <= kMaxDim,
                                     "paged_attention_prefill_cuda: head_dim must be 1..256"));
  SY_RETURN_IF_ERROR(detail::require(cache.n_kv_heads > 0 && n_heads > 0 &&
                                         n_heads % cache.n_kv_heads == 0,
                                     "paged_attention_prefill_cuda: n_heads must be a multiple of n_kv_heads"));
  SY_RETURN_IF_ERROR(detail::require(cache.page_size > 0 && n_tokens >= 0 && n_tokens <= INT_MAX,
                                     "paged_attention_prefill_cuda: bad shape"));
  // gridDim.y is at most 65535: longer batches go in slices of rows.
  constexpr std::int64_t kMaxRows = 65535;
  const std::int64_t width = static_cast<std::int64_t>(n_heads) * cache.head_dim;
  for (std::int64_t t0 = 0; t0 < n_tokens; t0 += kMaxRows) {
    const std::int64_t rows = n_tokens - t0 < kMaxRows ? n_tokens - t0 : kMaxRows;
    const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>(rows));
    prefill_kernel<<<grid, kWarps * 32, 0, stream>>>(q + t0 * width, n_heads, token_seq + t0, positions + t0, cache,
                                                     block_tables, table_stride, scale, out + t0 * width);
    SY_RETURN_IF_ERROR(detail::check_launch("paged_attention_prefill_cuda"));
  }
  return Status::Ok();
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_attention_prefill_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(prefill_kernel)});
}

}  // namespace sy::kernels
