// Grouped-query attention over a paged KV cache (prefill and decode share one kernel).
#pragma once

#include <cstdint>

namespace sy::kernels {

// One layer's KV pool: k and v are [num_pages][page_size][n_kv_heads][head_dim] float32.
// A sequence owns a block table: logical page i of the sequence is physical page table[i],
// so position p lives at page table[p / page_size], slot p % page_size.
struct KvLayerView {
  float* k = nullptr;
  float* v = nullptr;
  std::int32_t num_pages = 0;
  std::int32_t page_size = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;
};

// Stores the keys and values of n_tokens consecutive positions starting at start_pos.
// k and v are [n_tokens, n_kv_heads, head_dim]. The block table must cover every position.
void kv_cache_write(const KvLayerView& cache, const std::int32_t* block_table, std::int32_t start_pos,
                    std::int64_t n_tokens, const float* k, const float* v);

// Causal attention of n_tokens queries of ONE sequence against its cached keys/values.
// q is [n_tokens, n_heads, head_dim]; query t at absolute position positions[t] attends to
// cached positions 0..positions[t] inclusive (which must already be written). Query head h
// uses KV head h / (n_heads / n_kv_heads). Softmax in float32 with max subtraction.
// out is [n_tokens, n_heads, head_dim].
void paged_attention(const float* q, std::int64_t n_tokens, std::int32_t n_heads,
                     const std::int32_t* positions, const KvLayerView& cache,
                     const std::int32_t* block_table, float scale, float* out);

}  // namespace sy::kernels
