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

// The grouped variant for GQA decode: one block per (KV head, row, split) instead of per query
// head. The split kernel's blocks of one KV head's query heads each stream that head's keys
// and values (from L2 after the first); at 32 or 128 decode rows those re-reads, G per key,
// bound it (0.18 and 0.69 ms a layer on an H100 where reading the cache once takes 0.02 and
// 0.09 ms). Here a tile of keys and values is read once into shared memory and serves all G
// query heads: thread (head, key) of a tile computes one score, a head's scores are reduced in
// its group of lanes (online softmax per head), and each thread accumulates some (head,
// feature) outputs.
// Partials are the split kernel's, so merge_kernel merges them.
constexpr int kGqaThreads = 128;
constexpr int kGqaMaxOutputs = 2048;  // G × head_dim: the group's queries, and its outputs over the threads
constexpr int kGqaOutputsPerThread = kGqaMaxOutputs / kGqaThreads;
constexpr int kGqaTileFloats = 4096;  // keys × head_dim of a tile, for K and for V

// Keys per tile: every (head, key) pair one thread, a power of two ≤ 32 (a head's lanes are one
// segment of a warp), and K and V tiles within kGqaTileFloats each.
__host__ __device__ constexpr int gqa_tile_keys(int group, int head_dim) {
  int keys = group >= 16 ? 8 : group >= 8 ? 16 : 32;
  while (keys > 1 && keys * head_dim > kGqaTileFloats) keys /= 2;
  return keys;
}

std::size_t gqa_smem_bytes(int group, int head_dim) {
  const int keys = gqa_tile_keys(group, head_dim);
  return sizeof(float) * (static_cast<std::size_t>(group) * head_dim + static_cast<std::size_t>(keys) * (head_dim + 1) +
                          static_cast<std::size_t>(keys) * head_dim + static_cast<std::size_t>(group) * keys + 3 * group);
}

__global__ void __launch_bounds__(kGqaThreads)
    gqa_kernel(const float* __restrict__ q, int n_heads, const std::int32_t* __restrict__ token_seq,
               const std::int32_t* __restrict__ positions, KvLayerView cache, const std::int32_t* __restrict__ tables,
               int table_stride, float scale, float* __restrict__ partials, float* __restrict__ out) {
  const int g = blockIdx.x;
  const long long t = blockIdx.y;
  const int split = blockIdx.z, splits = gridDim.z;
  const int D = cache.head_dim;
  const int G = n_heads / cache.n_kv_heads;
  const int T = gqa_tile_keys(G, D);
  extern __shared__ float smem[];
  float* qs = smem;               // [G][D]
  float* ks = qs + G * D;         // [T][D + 1]: a thread's key row shifts banks
  float* vs = ks + T * (D + 1);   // [T][D]
  float* ps = vs + T * D;         // [G][T]: this tile's probabilities
  float* corr = ps + G * T;       // [G]: this tile's rescale of the older outputs
  float* run_m = corr + G;        // [G]: the maxima and sums, for the end
  float* run_l = run_m + G;

  const int tid = threadIdx.x;
  const float* qg = q + (t * n_heads + static_cast<long long>(g) * G) * D;
  for (int e = tid; e < G * D; e += kGqaThreads) qs[e] = qg[e];

  const int len = positions[t] + 1;
  const int chunk = (len + splits - 1) / splits;
  const int begin = split * chunk;
  const int end = min(len, begin + chunk);
  const std::int32_t* table = tables + static_cast<long long>(token_seq[t]) * table_stride;
  const long long slot_stride = static_cast<long long>(cache.n_kv_heads) * D;
  const long long head_offset = static_cast<long long>(g) * D;

  const int pairs = G * T;  // a multiple of 32: G ≥ 2 and T ≥ 16 (head_dim ≤ 256)
  const int my_h = tid / T, my_j = tid % T;
  float m = -INFINITY, l = 0.0f;
  float acc[kGqaOutputsPerThread];
#pragma unroll
  for (int i = 0; i < kGqaOutputsPerThread; ++i) acc[i] = 0.0f;

  for (int j0 = begin; j0 < end; j0 += T) {
    __syncthreads();  // the previous tile's K, V and probabilities are used up (and q is stored)
    for (int e = tid; e < T * D; e += kGqaThreads) {
      const int j = e / D, d = e % D;
      float kv = 0.0f, vv = 0.0f;
      if (j0 + j < end) {
        const int key = j0 + j;
        const long long slot = static_cast<long long>(table[key / cache.page_size]) * cache.page_size + key % cache.page_size;
        kv = cache.k[slot * slot_stride + head_offset + d];
        vv = cache.v[slot * slot_stride + head_offset + d];
      }
      ks[j * (D + 1) + d] = kv;
      vs[j * D + d] = vv;
    }
    __syncthreads();
    if (tid < pairs) {
      float score = -INFINITY;
      if (j0 + my_j < end) {
        float dot = 0.0f;
        const float* qh = qs + my_h * D;
        const float* kj = ks + my_j * (D + 1);
        for (int d = 0; d < D; ++d) dot += qh[d] * kj[d];
        score = dot * scale;
      }
      // The head's maximum over the tile: key j0 is real, so it is finite.
      float tile_max = score;
      for (int off = T / 2; off > 0; off >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off, T));
      const float m_new = fmaxf(m, tile_max);
      const float c = expf(m - m_new);  // 0 on the first tile (m = -inf)
      const float p = score == -INFINITY ? 0.0f : expf(score - m_new);
      float sum = p;
      for (int off = T / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off, T);
      l = l * c + sum;
      m = m_new;
      ps[my_h * T + my_j] = p;
      if (my_j == 0) corr[my_h] = c;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kGqaOutputsPerThread; ++i) {
      const int o = tid + i * kGqaThreads;
      if (o >= G * D) break;
      const int h = o / D, d = o % D;
      float a = acc[i] * corr[h];
      for (int j = 0; j < T; ++j) a += ps[h * T + j] * vs[j * D + d];
      acc[i] = a;
    }
  }
  // Each head's running maximum and sum, from its first lane (a split past a short row's keys
  // leaves -inf and 0, as the split kernel's partials do).
  if (tid < pairs && my_j == 0) {
    run_m[my_h] = m;
    run_l[my_h] = l;
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kGqaOutputsPerThread; ++i) {
    const int o = tid + i * kGqaThreads;
    if (o >= G * D) break;
    const int h = o / D, d = o % D;
    const long long head = t * n_heads + static_cast<long long>(g) * G + h;
    if (splits == 1) {
      out[head * D + d] = acc[i] / run_l[h];
    } else {
      partials[(head * splits + split) * (D + 2) + 2 + d] = acc[i];
    }
  }
  if (splits > 1 && tid < G) {
    float* part = partials + ((t * n_heads + static_cast<long long>(g) * G + tid) * splits + split) * (D + 2);
    part[0] = run_m[tid];
    part[1] = run_l[tid];
  }
}

// Queues `launch(t0, rows, partials)` over slices of at most 65535 rows (a grid's y; a batch
// that long fills the GPU without splitting), each followed by merge_kernel over its partials
// when the rows' keys are split. Both kernels' partials are [row][head][split][head_dim + 2].
template <class Launch>
Status launch_in_slices(std::int64_t n_tokens, std::int32_t n_heads, std::int32_t head_dim, std::int32_t splits,
                        float* partials, float* out, const char* what, const char* merge_what, cudaStream_t stream,
                        Launch launch) {
  constexpr std::int64_t kMaxRows = 65535;
  const std::int64_t width = static_cast<std::int64_t>(n_heads) * head_dim;
  const std::int64_t part_width = static_cast<std::int64_t>(n_heads) * splits * (head_dim + 2);
  for (std::int64_t t0 = 0; t0 < n_tokens; t0 += kMaxRows) {
    const std::int64_t rows = n_tokens - t0 < kMaxRows ? n_tokens - t0 : kMaxRows;
    float* part = splits == 1 ? nullptr : partials + t0 * part_width;
    launch(t0, static_cast<unsigned>(rows), part);
    SY_RETURN_IF_ERROR(detail::check_launch(what));
    if (splits > 1) {
      merge_kernel<<<dim3(static_cast<unsigned>(n_heads), static_cast<unsigned>(rows)), kWarps * 32, 0, stream>>>(
          part, n_heads, head_dim, splits, out + t0 * width);
      SY_RETURN_IF_ERROR(detail::check_launch(merge_what));
    }
  }
  return Status::Ok();
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
  const std::int64_t width = static_cast<std::int64_t>(n_heads) * cache.head_dim;
  return launch_in_slices(n_tokens, n_heads, cache.head_dim, splits, partials, out, "paged_attention_split_cuda",
                          "paged_attention_split_cuda (merge)", stream,
                          [&](std::int64_t t0, unsigned rows, float* part) {
                            const dim3 grid(static_cast<unsigned>(n_heads), rows, static_cast<unsigned>(splits));
                            split_kernel<<<grid, kWarps * 32, 0, stream>>>(q + t0 * width, n_heads, token_seq + t0,
                                                                           positions + t0, cache, block_tables,
                                                                           table_stride, scale, part, out + t0 * width);
                          });
}

bool attention_gqa_supported(std::int32_t n_heads, std::int32_t n_kv_heads, std::int32_t head_dim) {
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0 || head_dim <= 0 || head_dim > kMaxDim) return false;
  const std::int32_t group = n_heads / n_kv_heads;
  return (group == 2 || group == 4 || group == 8 || group == 16) && group * head_dim <= kGqaMaxOutputs;
}

std::int64_t attention_gqa_floats(std::int64_t n_tokens, std::int32_t n_heads, std::int32_t n_kv_heads,
                                  std::int32_t head_dim) {
  const std::int32_t splits = attention_splits(n_tokens, n_kv_heads);
  return splits == 1 ? 0 : n_tokens * n_heads * splits * (static_cast<std::int64_t>(head_dim) + 2);
}

Status paged_attention_gqa_cuda(const float* q, std::int64_t n_tokens, std::int32_t n_heads,
                                const std::int32_t* token_seq, const std::int32_t* positions,
                                const KvLayerView& cache, const std::int32_t* block_tables, std::int32_t table_stride,
                                float scale, float* partials, float* out, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(attention_gqa_supported(n_heads, cache.n_kv_heads, cache.head_dim),
                                     "paged_attention_gqa_cuda: needs 2, 4, 8 or 16 query heads per KV head and "
                                     "(heads per KV head) x head_dim <= 2048"));
  SY_RETURN_IF_ERROR(detail::require(cache.page_size > 0 && n_tokens >= 0 && n_tokens <= INT_MAX,
                                     "paged_attention_gqa_cuda: bad shape"));
  const std::int32_t splits = attention_splits(n_tokens, cache.n_kv_heads);
  SY_RETURN_IF_ERROR(detail::require(splits == 1 || partials != nullptr,
                                     "paged_attention_gqa_cuda: no partials buffer for a split launch"));
  const std::int32_t group = n_heads / cache.n_kv_heads;
  const std::size_t smem = gqa_smem_bytes(group, cache.head_dim);
  const std::int64_t width = static_cast<std::int64_t>(n_heads) * cache.head_dim;
  return launch_in_slices(n_tokens, n_heads, cache.head_dim, splits, partials, out, "paged_attention_gqa_cuda",
                          "paged_attention_gqa_cuda (merge)", stream,
                          [&](std::int64_t t0, unsigned rows, float* part) {
                            const dim3 grid(static_cast<unsigned>(cache.n_kv_heads), rows,
                                            static_cast<unsigned>(splits));
                            gqa_kernel<<<grid, kGqaThreads, smem, stream>>>(q + t0 * width, n_heads, token_seq + t0,
                                                                            positions + t0, cache, block_tables,
                                                                            table_stride, scale, part, out + t0 * width);
                          });
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_attention_split_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(split_kernel), SY_KERNEL_ENTRY(merge_kernel), SY_KERNEL_ENTRY(gqa_kernel)});
}

}  // namespace sy::kernels
