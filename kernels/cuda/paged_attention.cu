// paged_attention_decode_cuda: one block per (head, sequence); warps split the keys and keep
// an online softmax each, merged at the end (no score buffer, so any context length fits).
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
    decode_kernel(const float* __restrict__ q, int n_heads, const std::int32_t* __restrict__ positions,
                  KvLayerView cache, const std::int32_t* __restrict__ tables, int table_stride, float scale,
                  float* __restrict__ out) {
  const int h = blockIdx.x;
  const int s = blockIdx.y;
  const int D = cache.head_dim;
  const int g = h / (n_heads / cache.n_kv_heads);  // grouped-query: this head's KV head
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* qh = q + (static_cast<long long>(s) * n_heads + h) * D;
  // Lane holds dimensions lane, lane + 32, ...: each K/V row is read coalesced by one warp.
  float qr[kMaxDimPerLane], acc[kMaxDimPerLane];
#pragma unroll
  for (int i = 0; i < kMaxDimPerLane; ++i) {
    const int d = lane + 32 * i;
    qr[i] = d < D ? qh[d] : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int len = positions[s] + 1;
  const std::int32_t* table = tables + static_cast<long long>(s) * table_stride;
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
    const float correction = expf(m - m_new);  // 0 on the first key (m = -inf)
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
  // Merge the warps' partial softmaxes; warp 0 saw key 0, so the merged max is finite, and a
  // warp that saw no key (m = -inf, l = 0) contributes exp(-inf) = 0.
  float m_all = warp_m[0];
  for (int w = 1; w < kWarps; ++w) m_all = fmaxf(m_all, warp_m[w]);
  float weight[kWarps];
  float l_all = 0.0f;
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = expf(warp_m[w] - m_all);
    l_all += warp_l[w] * weight[w];
  }
  float* oh = out + (static_cast<long long>(s) * n_heads + h) * D;
  for (int d = threadIdx.x; d < D; d += kWarps * 32) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) o += warp_acc[w][d] * weight[w];
    oh[d] = o / l_all;
  }
}

}  // namespace

Status paged_attention_decode_cuda(const float* q, std::int32_t n_seqs, std::int32_t n_heads,
                                 const std::int32_t* positions, const KvLayerView& cache,
                                 const std::int32_t* block_tables, std::int32_t table_stride, float scale,
                                 float* out, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(cache.head_dim > 0 && cache.head_dim <= kMaxDim, "paged_attention_decode_cuda: head_dim must be 1..256"));
  SY_RETURN_IF_ERROR(detail::require(cache.n_kv_heads > 0 && n_heads > 0 && n_heads % cache.n_kv_heads == 0,
                  "paged_attention_decode_cuda: n_heads must be a multiple of n_kv_heads"));
  SY_RETURN_IF_ERROR(detail::require(cache.page_size > 0 && n_seqs >= 0 && n_seqs <= 65535, "paged_attention_decode_cuda: bad shape"));
  if (n_seqs == 0) return Status::Ok();
  const dim3 grid(static_cast<unsigned>(n_heads), static_cast<unsigned>(n_seqs));
  decode_kernel<<<grid, kWarps * 32, 0, stream>>>(q, n_heads, positions, cache, block_tables, table_stride, scale, out);
  SY_RETURN_IF_ERROR(detail::check_launch("paged_attention_decode_cuda"));
  return Status::Ok();
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_paged_attention_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(decode_kernel)});
}

}  // namespace sy::kernels
