#include "kernels/cpu/paged_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm.h"

namespace sy::kernels {

void kv_cache_write(const KvLayerView& cache, const std::int32_t* block_table, std::int32_t start_pos,
                    std::int64_t n_tokens, const float* k, const float* v) {
  // A token's [n_kv_heads, head_dim] block is contiguous both in the input and in its slot.
  const std::int64_t width = static_cast<std::int64_t>(cache.n_kv_heads) * cache.head_dim;
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    const std::int64_t pos = start_pos + t;
    const std::int32_t page = block_table[pos / cache.page_size];
    assert(page >= 0 && page < cache.num_pages);
    const std::int64_t slot = static_cast<std::int64_t>(page) * cache.page_size + pos % cache.page_size;
    std::memcpy(cache.k + slot * width, k + t * width, static_cast<std::size_t>(width) * sizeof(float));
    std::memcpy(cache.v + slot * width, v + t * width, static_cast<std::size_t>(width) * sizeof(float));
  }
}

namespace {

// One unit of parallel work: the query heads that share one KV head, over a block of
// consecutive query tokens. Each K/V row it touches is loaded once for all of those rows,
// which is what makes grouped-query attention cheaper than multi-head attention.
struct Rows {
  static constexpr int kMax = 32;
  int count = 0;
  const float* q[kMax];
  float* out[kMax];
  std::int32_t pos[kMax];
};

// ---- scores: s[r·lds + j] = scale · q_r · k_j for n keys with row stride ks ----

float dot(const float* a, const float* b, std::int32_t D) {
  float s = 0.0f;
  for (std::int32_t d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

void scores_scalar(const Rows& rows, const float* k, std::int64_t ks, std::int32_t n, std::int32_t D, float scale,
                   float* s, std::int64_t lds) {
  for (std::int32_t j = 0; j < n; ++j)
    for (int r = 0; r < rows.count; ++r) s[r * lds + j] = dot(rows.q[r], k + j * ks, D) * scale;
}

SY_TARGET_AVX2 void scores_avx2(const Rows& rows, const float* k, std::int64_t ks, std::int32_t n, std::int32_t D,
                                float scale, float* s, std::int64_t lds) {
  const std::int32_t D8 = D / 8 * 8;
  std::int32_t j = 0;
  // Four keys at a time: four independent accumulators per row and one packed reduction.
  for (; j + 4 <= n; j += 4) {
    const float* k0 = k + j * ks;
    const float* k1 = k0 + ks;
    const float* k2 = k1 + ks;
    const float* k3 = k2 + ks;
    for (int r = 0; r < rows.count; ++r) {
      const float* q = rows.q[r];
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
             a3 = _mm256_setzero_ps();
      for (std::int32_t d = 0; d < D8; d += 8) {
        const __m256 qv = _mm256_loadu_ps(q + d);
        a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + d), a0);
        a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k1 + d), a1);
        a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k2 + d), a2);
        a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k3 + d), a3);
      }
      alignas(16) float sum[4];
      _mm_store_ps(sum, avx2::hsum4(a0, a1, a2, a3));
      for (std::int32_t d = D8; d < D; ++d) {
        sum[0] += q[d] * k0[d];
        sum[1] += q[d] * k1[d];
        sum[2] += q[d] * k2[d];
        sum[3] += q[d] * k3[d];
      }
      for (int i = 0; i < 4; ++i) s[r * lds + j + i] = sum[i] * scale;
    }
  }
  for (; j < n; ++j) {
    const float* kj = k + j * ks;
    for (int r = 0; r < rows.count; ++r) {
      const float* q = rows.q[r];
      __m256 a = _mm256_setzero_ps();
      for (std::int32_t d = 0; d < D8; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kj + d), a);
      float sum = avx2::hsum(a);
      for (std::int32_t d = D8; d < D; ++d) sum += q[d] * kj[d];
      s[r * lds + j] = sum * scale;
    }
  }
}

// ---- softmax of s[0, len) in place; s[len, L) (keys after the query) become 0 ----

float softmax_scalar(float* s, std::int64_t len, std::int64_t L) {
  const float m = *std::max_element(s, s + len);
  float sum = 0.0f;
  for (std::int64_t j = 0; j < len; ++j) sum += (s[j] = std::exp(s[j] - m));
  std::fill(s + len, s + L, 0.0f);
  return sum;
}

SY_TARGET_AVX2 float softmax_avx2(float* s, std::int64_t len, std::int64_t L) {
  __m256 mv = _mm256_set1_ps(-INFINITY);
  std::int64_t j = 0;
  for (; j + 8 <= len; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + j));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  float m = _mm_cvtss_f32(m4);
  for (; j < len; ++j) m = std::max(m, s[j]);
  const __m256 mb = _mm256_set1_ps(m);
  __m256 sv = _mm256_setzero_ps();
  j = 0;
  for (; j + 8 <= len; j += 8) {
    const __m256 e = avx2::exp(_mm256_sub_ps(_mm256_loadu_ps(s + j), mb));
    _mm256_storeu_ps(s + j, e);
    sv = _mm256_add_ps(sv, e);
  }
  float sum = avx2::hsum(sv);
  for (; j < len; ++j) sum += (s[j] = std::exp(s[j] - m));
  std::fill(s + len, s + L, 0.0f);
  return sum;
}

// ---- out_r += Σ_j p[r·lds + j] · v_j over n values with row stride vs ----

void accumulate_scalar(const Rows& rows, const float* p, std::int64_t lds, const float* v, std::int64_t vs,
                       std::int32_t n, std::int32_t D) {
  for (std::int32_t j = 0; j < n; ++j)
    for (int r = 0; r < rows.count; ++r) {
      const float w = p[r * lds + j];
      if (w == 0.0f) continue;
      float* o = rows.out[r];
      for (std::int32_t d = 0; d < D; ++d) o[d] += w * v[j * vs + d];
    }
}

SY_TARGET_AVX2 void accumulate_avx2(const Rows& rows, const float* p, std::int64_t lds, const float* v,
                                    std::int64_t vs, std::int32_t n, std::int32_t D) {
  const std::int32_t D8 = D / 8 * 8;
  std::int32_t j = 0;
  // Four values per pass over the output row: a quarter of the loads and stores of out.
  for (; j + 4 <= n; j += 4) {
    const float* v0 = v + j * vs;
    const float* v1 = v0 + vs;
    const float* v2 = v1 + vs;
    const float* v3 = v2 + vs;
    for (int r = 0; r < rows.count; ++r) {
      const float* pr = p + r * lds + j;
      float* o = rows.out[r];
      const __m256 e0 = _mm256_set1_ps(pr[0]), e1 = _mm256_set1_ps(pr[1]), e2 = _mm256_set1_ps(pr[2]),
                   e3 = _mm256_set1_ps(pr[3]);
      for (std::int32_t d = 0; d < D8; d += 8) {
        __m256 acc = _mm256_loadu_ps(o + d);
        acc = _mm256_fmadd_ps(e0, _mm256_loadu_ps(v0 + d), acc);
        acc = _mm256_fmadd_ps(e1, _mm256_loadu_ps(v1 + d), acc);
        acc = _mm256_fmadd_ps(e2, _mm256_loadu_ps(v2 + d), acc);
        acc = _mm256_fmadd_ps(e3, _mm256_loadu_ps(v3 + d), acc);
        _mm256_storeu_ps(o + d, acc);
      }
      for (std::int32_t d = D8; d < D; ++d) o[d] += pr[0] * v0[d] + pr[1] * v1[d] + pr[2] * v2[d] + pr[3] * v3[d];
    }
  }
  for (; j < n; ++j) {
    const float* vj = v + j * vs;
    for (int r = 0; r < rows.count; ++r) {
      const __m256 e = _mm256_set1_ps(p[r * lds + j]);
      float* o = rows.out[r];
      for (std::int32_t d = 0; d < D8; d += 8)
        _mm256_storeu_ps(o + d, _mm256_fmadd_ps(e, _mm256_loadu_ps(vj + d), _mm256_loadu_ps(o + d)));
      for (std::int32_t d = D8; d < D; ++d) o[d] += p[r * lds + j] * vj[d];
    }
  }
}

// Exact two-pass softmax over whole rows: scores of all rows against keys 0..max position,
// page by page; softmax per row; then the value sum, page by page again.
void attend_rows(const Rows& rows, const KvLayerView& cache, const std::int32_t* block_table, std::int32_t kv_head,
                 float scale, bool vector, std::vector<float>& scratch) {
  const std::int32_t D = cache.head_dim;
  const std::int32_t ps = cache.page_size;
  const std::int64_t stride = static_cast<std::int64_t>(cache.n_kv_heads) * D;  // between slots
  std::int32_t max_pos = 0;
  for (int r = 0; r < rows.count; ++r) max_pos = std::max(max_pos, rows.pos[r]);
  const std::int64_t L = static_cast<std::int64_t>(max_pos) + 1;
  const std::int64_t lds = (L + 7) / 8 * 8;
  if (static_cast<std::int64_t>(scratch.size()) < rows.count * lds) scratch.resize(static_cast<std::size_t>(rows.count * lds));
  float* s = scratch.data();

  const std::int64_t n_pages = (L + ps - 1) / ps;
  auto page_base = [&](const float* pool, std::int64_t lp) {
    const std::int64_t page = block_table[lp];
    assert(page >= 0 && page < cache.num_pages);
    return pool + (page * ps * cache.n_kv_heads + kv_head) * D;
  };
  for (std::int64_t lp = 0; lp < n_pages; ++lp) {
    const auto n = static_cast<std::int32_t>(std::min<std::int64_t>(ps, L - lp * ps));
    const float* k = page_base(cache.k, lp);
    if (vector) {
      scores_avx2(rows, k, stride, n, D, scale, s + lp * ps, lds);
    } else {
      scores_scalar(rows, k, stride, n, D, scale, s + lp * ps, lds);
    }
  }
  float inv_sum[Rows::kMax];
  for (int r = 0; r < rows.count; ++r) {
    const std::int64_t len = static_cast<std::int64_t>(rows.pos[r]) + 1;
    const float sum = vector ? softmax_avx2(s + r * lds, len, L) : softmax_scalar(s + r * lds, len, L);
    inv_sum[r] = 1.0f / sum;
    std::fill(rows.out[r], rows.out[r] + D, 0.0f);
  }
  for (std::int64_t lp = 0; lp < n_pages; ++lp) {
    const auto n = static_cast<std::int32_t>(std::min<std::int64_t>(ps, L - lp * ps));
    const float* v = page_base(cache.v, lp);
    if (vector) {
      accumulate_avx2(rows, s + lp * ps, lds, v, stride, n, D);
    } else {
      accumulate_scalar(rows, s + lp * ps, lds, v, stride, n, D);
    }
  }
  for (int r = 0; r < rows.count; ++r)
    for (std::int32_t d = 0; d < D; ++d) rows.out[r][d] *= inv_sum[r];
}

}  // namespace

void paged_attention(const float* q, std::int64_t n_tokens, std::int32_t n_heads, const std::int32_t* positions,
                     const KvLayerView& cache, const std::int32_t* block_table, float scale, float* out) {
  if (n_tokens <= 0) return;
  const std::int32_t kv_heads = cache.n_kv_heads;
  const std::int32_t D = cache.head_dim;
  assert(kv_heads > 0 && n_heads % kv_heads == 0 && cache.page_size > 0);
  const std::int32_t group = n_heads / kv_heads;
  // Query tokens per task: enough rows to reuse each loaded K/V row well, but within Rows.
  const std::int64_t per_task = std::max<std::int64_t>(1, std::min<std::int64_t>(Rows::kMax, 16) / group);
  const std::int64_t q_blocks = (n_tokens + per_task - 1) / per_task;
  const std::int64_t tasks = q_blocks * kv_heads;
  const bool vector = cpu_has_avx2();
  // Rough multiply-add count, to stay serial where a parallel region would cost more.
  const std::int64_t work = n_tokens * n_heads * D * (static_cast<std::int64_t>(positions[n_tokens - 1]) + 1);
  const int threads = tasks == 1 || work < (std::int64_t{1} << 16) ? 1 : num_threads();
  // Tasks have very different costs under the causal mask (late queries see more keys).
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (std::int64_t task = 0; task < tasks; ++task) {
    thread_local std::vector<float> scratch;
    const auto g = static_cast<std::int32_t>(task % kv_heads);
    const std::int64_t t0 = task / kv_heads * per_task;
    const std::int64_t t1 = std::min(n_tokens, t0 + per_task);
    // Rows of this KV head's query heads, token by token; a group wider than Rows::kMax
    // (unusual) simply takes several passes.
    Rows rows;
    for (std::int64_t t = t0; t < t1; ++t)
      for (std::int32_t hh = 0; hh < group; ++hh) {
        if (rows.count == Rows::kMax) {
          attend_rows(rows, cache, block_table, g, scale, vector, scratch);
          rows.count = 0;
        }
        const std::int64_t offset = (t * n_heads + g * group + hh) * D;
        rows.q[rows.count] = q + offset;
        rows.out[rows.count] = out + offset;
        rows.pos[rows.count] = positions[t];
        ++rows.count;
      }
    if (rows.count > 0) attend_rows(rows, cache, block_table, g, scale, vector, scratch);
  }
}

}  // namespace sy::kernels
