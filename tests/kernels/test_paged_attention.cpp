// Paged grouped-query attention: against a dense reference, across page boundaries and
// scattered block tables, and prefill against step-by-step decode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/paged_attention.h"
#include "tests/kernels/reference.h"

namespace sy::test {
namespace {

struct AttnShape {
  std::int32_t heads, kv_heads, head_dim, page_size, tokens;
};

// A KV pool filled with NaN (so a read of anything not written poisons the output) and a
// block table that scatters the sequence over shuffled physical pages.
struct PagedFixture {
  AttnShape s;
  std::vector<float> k_pool, v_pool;
  std::vector<std::int32_t> table;
  kernels::KvLayerView view;

  PagedFixture(const AttnShape& shape, Rng& rng) : s(shape) {
    const std::int32_t pages_needed = (s.tokens + s.page_size - 1) / s.page_size;
    const std::int32_t pool_pages = 2 * pages_needed + 3;
    const auto pool = static_cast<std::size_t>(pool_pages) * s.page_size * s.kv_heads * s.head_dim;
    k_pool.assign(pool, NAN);
    v_pool.assign(pool, NAN);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(pool_pages));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng.engine());
    table.assign(ids.begin(), ids.begin() + pages_needed);
    view = {k_pool.data(), v_pool.data(), pool_pages, s.page_size, s.kv_heads, s.head_dim};
  }
};

// Dense causal GQA in double: query t (at position pos[t]) over keys 0..pos[t] of the
// logical [tokens, kv_heads, head_dim] K and V.
std::vector<double> ref_attention(const std::vector<float>& q, const std::vector<std::int32_t>& pos,
                                  const std::vector<float>& k, const std::vector<float>& v, const AttnShape& s,
                                  double scale) {
  const std::int32_t group = s.heads / s.kv_heads;
  std::vector<double> out(q.size());
  for (std::size_t t = 0; t < pos.size(); ++t)
    for (std::int32_t h = 0; h < s.heads; ++h) {
      const std::int32_t g = h / group;
      std::vector<double> score(static_cast<std::size_t>(pos[t]) + 1);
      double m = -INFINITY;
      for (std::int32_t j = 0; j <= pos[t]; ++j) {
        double dot = 0.0;
        for (std::int32_t d = 0; d < s.head_dim; ++d)
          dot += static_cast<double>(q[(t * s.heads + h) * s.head_dim + d]) *
                 k[(static_cast<std::size_t>(j) * s.kv_heads + g) * s.head_dim + d];
        score[static_cast<std::size_t>(j)] = dot * scale;
        m = std::max(m, dot * scale);
      }
      double sum = 0.0;
      for (double& x : score) sum += (x = std::exp(x - m));
      for (std::int32_t d = 0; d < s.head_dim; ++d) {
        double acc = 0.0;
        for (std::int32_t j = 0; j <= pos[t]; ++j)
          acc += score[static_cast<std::size_t>(j)] * v[(static_cast<std::size_t>(j) * s.kv_heads + g) * s.head_dim + d];
        out[(t * s.heads + h) * s.head_dim + d] = acc / sum;
      }
    }
  return out;
}

std::string attn_case_name(const ::testing::TestParamInfo<AttnShape>& p) {
  const AttnShape& s = p.param;
  std::string name;
  for (const auto& [tag, value] : {std::pair{"h", s.heads}, std::pair{"_kv", s.kv_heads}, std::pair{"_d", s.head_dim},
                                   std::pair{"_ps", s.page_size}, std::pair{"_t", s.tokens}}) {
    name += tag;
    name += std::to_string(value);
  }
  return name;
}

class PagedAttentionTest : public ::testing::TestWithParam<AttnShape> {};

TEST_P(PagedAttentionTest, PrefillMatchesDenseReference) {
  const AttnShape s = GetParam();
  Rng rng(static_cast<std::uint64_t>(s.heads * 100 + s.kv_heads * 10 + s.tokens));
  const auto kv_n = static_cast<std::size_t>(s.tokens) * s.kv_heads * s.head_dim;
  const auto q_n = static_cast<std::size_t>(s.tokens) * s.heads * s.head_dim;
  const std::vector<float> k = rng.uniform_vector(kv_n, -2.0f, 2.0f);
  const std::vector<float> v = rng.uniform_vector(kv_n);
  const std::vector<float> q = rng.uniform_vector(q_n, -2.0f, 2.0f);
  std::vector<std::int32_t> pos(static_cast<std::size_t>(s.tokens));
  std::iota(pos.begin(), pos.end(), 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const std::vector<double> ref = ref_attention(q, pos, k, v, s, scale);

  for_each_path([&](const std::string& path) {
    SCOPED_TRACE(path);
    PagedFixture f(s, rng);
    kernels::kv_cache_write(f.view, f.table.data(), 0, s.tokens, k.data(), v.data());
    std::vector<float> out(q_n, NAN);
    kernels::paged_attention(q.data(), s.tokens, s.heads, pos.data(), f.view, f.table.data(), scale, out.data());
    EXPECT_LT(nmse(out, ref), 1e-11);
  });
}

// Chunked prefill: a prefix written earlier, the rest written and attended in one call.
TEST_P(PagedAttentionTest, ChunkedPrefillAfterCachedPrefix) {
  const AttnShape s = GetParam();
  if (s.tokens < 2) GTEST_SKIP() << "needs a prefix and a chunk";
  Rng rng(static_cast<std::uint64_t>(s.tokens * 7 + 1));
  const std::int32_t prefix = s.tokens / 3 + 1;
  const std::int32_t chunk = s.tokens - prefix;
  const std::size_t width = static_cast<std::size_t>(s.kv_heads) * s.head_dim;
  const std::vector<float> k = rng.uniform_vector(s.tokens * width, -2.0f, 2.0f);
  const std::vector<float> v = rng.uniform_vector(s.tokens * width);
  const std::vector<float> q = rng.uniform_vector(static_cast<std::size_t>(chunk) * s.heads * s.head_dim, -2.0f, 2.0f);
  std::vector<std::int32_t> pos(static_cast<std::size_t>(chunk));
  std::iota(pos.begin(), pos.end(), prefix);
  const float scale = 0.3f;  // not 1/sqrt(d): the kernel must use what it is given

  PagedFixture f(s, rng);
  kernels::kv_cache_write(f.view, f.table.data(), 0, prefix, k.data(), v.data());
  kernels::kv_cache_write(f.view, f.table.data(), prefix, chunk, k.data() + prefix * width, v.data() + prefix * width);
  std::vector<float> out(q.size(), NAN);
  kernels::paged_attention(q.data(), chunk, s.heads, pos.data(), f.view, f.table.data(), scale, out.data());
  EXPECT_LT(nmse(out, ref_attention(q, pos, k, v, s, scale)), 1e-11);
}

// T one-token decode steps must give what one prefill of T tokens gives: the engine relies
// on batch composition not changing a request's results.
TEST_P(PagedAttentionTest, PrefillEqualsStepByStepDecode) {
  const AttnShape s = GetParam();
  Rng rng(static_cast<std::uint64_t>(s.tokens * 13 + 5));
  const std::size_t width = static_cast<std::size_t>(s.kv_heads) * s.head_dim;
  const std::size_t q_width = static_cast<std::size_t>(s.heads) * s.head_dim;
  const std::vector<float> k = rng.uniform_vector(s.tokens * width, -2.0f, 2.0f);
  const std::vector<float> v = rng.uniform_vector(s.tokens * width);
  const std::vector<float> q = rng.uniform_vector(s.tokens * q_width, -2.0f, 2.0f);
  std::vector<std::int32_t> pos(static_cast<std::size_t>(s.tokens));
  std::iota(pos.begin(), pos.end(), 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));

  PagedFixture prefill(s, rng);
  kernels::kv_cache_write(prefill.view, prefill.table.data(), 0, s.tokens, k.data(), v.data());
  std::vector<float> all(q.size());
  kernels::paged_attention(q.data(), s.tokens, s.heads, pos.data(), prefill.view, prefill.table.data(), scale, all.data());

  PagedFixture decode(s, rng);  // different physical pages
  std::vector<float> step(q.size());
  for (std::int32_t t = 0; t < s.tokens; ++t) {
    kernels::kv_cache_write(decode.view, decode.table.data(), t, 1, k.data() + t * width, v.data() + t * width);
    kernels::paged_attention(q.data() + t * q_width, 1, s.heads, &pos[static_cast<std::size_t>(t)], decode.view,
                             decode.table.data(), scale, step.data() + t * q_width);
  }
  float worst = 0.0f;
  for (std::size_t i = 0; i < all.size(); ++i) worst = std::max(worst, std::fabs(all[i] - step[i]));
  EXPECT_LE(worst, 1e-6f);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PagedAttentionTest,
    ::testing::Values(AttnShape{4, 4, 64, 16, 37},   // multi-head, partial last page
                      AttnShape{8, 2, 64, 16, 100},  // GQA, group of 4
                      AttnShape{6, 1, 32, 5, 23},    // MQA, odd page size
                      AttnShape{4, 2, 40, 7, 50},    // head_dim not a multiple of 8
                      AttnShape{2, 1, 8, 1, 9},      // one slot per page
                      AttnShape{1, 1, 16, 4, 1},     // a single token
                      AttnShape{40, 1, 16, 16, 20},  // a group wider than one task's rows
                      AttnShape{16, 4, 128, 32, 130}),
    attn_case_name);

// With every value of KV head g equal to g, query head h must read exactly h / group: a
// mapping by h % kv_heads (or any other) shows up as a wrong constant.
TEST(PagedAttention, GroupedQueryHeadsReadTheirKvHead) {
  const AttnShape s{12, 3, 8, 4, 6};
  Rng rng(9);
  const std::size_t width = static_cast<std::size_t>(s.kv_heads) * s.head_dim;
  const std::vector<float> k = rng.uniform_vector(s.tokens * width);
  std::vector<float> v(s.tokens * width);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i / s.head_dim % s.kv_heads);
  const std::vector<float> q = rng.uniform_vector(static_cast<std::size_t>(s.tokens) * s.heads * s.head_dim);
  std::vector<std::int32_t> pos(static_cast<std::size_t>(s.tokens));
  std::iota(pos.begin(), pos.end(), 0);
  for_each_path([&](const std::string& path) {
    SCOPED_TRACE(path);
    PagedFixture f(s, rng);
    kernels::kv_cache_write(f.view, f.table.data(), 0, s.tokens, k.data(), v.data());
    std::vector<float> out(q.size());
    kernels::paged_attention(q.data(), s.tokens, s.heads, pos.data(), f.view, f.table.data(), 0.5f, out.data());
    for (std::int32_t t = 0; t < s.tokens; ++t)
      for (std::int32_t h = 0; h < s.heads; ++h)
        EXPECT_NEAR(out[(static_cast<std::size_t>(t) * s.heads + h) * s.head_dim], h / (s.heads / s.kv_heads), 1e-6)
            << "token " << t << " head " << h;
  });
}

// kv_cache_write puts position p at page table[p / page_size], slot p % page_size.
TEST(PagedAttention, CacheWriteLayout) {
  const std::int32_t page_size = 3, kv_heads = 2, dim = 4, pages = 4;
  std::vector<float> kp(static_cast<std::size_t>(pages * page_size * kv_heads * dim), -1.0f), vp = kp;
  const kernels::KvLayerView view{kp.data(), vp.data(), pages, page_size, kv_heads, dim};
  const std::int32_t table[] = {2, 0, 3};
  std::vector<float> k(5 * kv_heads * dim), v(k.size());
  for (std::size_t i = 0; i < k.size(); ++i) {
    k[i] = static_cast<float>(i);
    v[i] = -static_cast<float>(i);
  }
  kernels::kv_cache_write(view, table, 2, 5, k.data(), v.data());  // positions 2..6
  for (std::int32_t t = 0; t < 5; ++t) {
    const std::int32_t p = 2 + t;
    const std::size_t slot = static_cast<std::size_t>(table[p / page_size] * page_size + p % page_size);
    for (std::int32_t i = 0; i < kv_heads * dim; ++i) {
      EXPECT_EQ(kp[slot * kv_heads * dim + i], k[static_cast<std::size_t>(t * kv_heads * dim + i)]);
      EXPECT_EQ(vp[slot * kv_heads * dim + i], v[static_cast<std::size_t>(t * kv_heads * dim + i)]);
    }
  }
  // Page 1 is in nobody's table: untouched.
  for (std::int32_t i = 0; i < page_size * kv_heads * dim; ++i) EXPECT_EQ(kp[static_cast<std::size_t>(page_size * kv_heads * dim + i)], -1.0f);
}

}  // namespace
}  // namespace sy::test
