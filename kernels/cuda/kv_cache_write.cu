// kv_cache_write_cuda: one block per token; the token's [n_kv_heads, head_dim] block of k and
// of v is contiguous in the input and in its cache slot, as in the CPU kernel.
#include <climits>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads)
    kv_write_kernel(KvLayerView cache, const std::int32_t* __restrict__ tables, int table_stride,
                    const std::int32_t* __restrict__ token_seq, const std::int32_t* __restrict__ positions,
                    const float* __restrict__ k, const float* __restrict__ v) {
  const long long t = blockIdx.x;
  const long long width = static_cast<long long>(cache.n_kv_heads) * cache.head_dim;
  const int pos = positions[t];
  const std::int32_t* table = tables + static_cast<long long>(token_seq[t]) * table_stride;
  const long long page = table[pos / cache.page_size];
  if (page < 0 || page >= cache.num_pages) return;  // a bad table is the engine's bug; never write outside
  const long long slot = page * cache.page_size + pos % cache.page_size;
  float* kd = cache.k + slot * width;
  float* vd = cache.v + slot * width;
  const float* ks = k + t * width;
  const float* vs = v + t * width;
  for (long long i = threadIdx.x; i < width; i += kThreads) {
    kd[i] = ks[i];
    vd[i] = vs[i];
  }
}

}  // namespace

Status kv_cache_write_cuda(const KvLayerView& cache, const std::int32_t* block_tables, std::int32_t table_stride,
                           const std::int32_t* token_seq, const std::int32_t* positions, std::int64_t n_tokens,
                           const float* k, const float* v, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n_tokens >= 0 && n_tokens <= INT_MAX && cache.page_size > 0 &&
                                         cache.n_kv_heads > 0 && cache.head_dim > 0,
                                     "kv_cache_write_cuda: bad shape"));
  if (n_tokens == 0) return Status::Ok();
  kv_write_kernel<<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(cache, block_tables, table_stride,
                                                                            token_seq, positions, k, v);
  return detail::check_launch("kv_cache_write_cuda");
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_kv_cache_write_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(kv_write_kernel)});
}

}  // namespace sy::kernels
