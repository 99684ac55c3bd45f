// Router softmax + top-k: ordering, ties, renormalisation, every k.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/router.h"
#include "tests/kernels/reference.h"

namespace sy::test {
namespace {

// softmax in double, then a stable sort by descending probability: ties keep id order.
void ref_router(const float* logits, std::int32_t E, std::int32_t k, bool renorm, std::vector<std::int32_t>& ids,
                std::vector<double>& w) {
  std::vector<double> p(static_cast<std::size_t>(E));
  const double m = *std::max_element(logits, logits + E);
  double sum = 0.0;
  for (std::int32_t e = 0; e < E; ++e) sum += (p[static_cast<std::size_t>(e)] = std::exp(logits[e] - m));
  for (double& x : p) x /= sum;
  std::vector<std::int32_t> order(static_cast<std::size_t>(E));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)];
  });
  ids.assign(order.begin(), order.begin() + k);
  w.clear();
  for (const std::int32_t e : ids) w.push_back(p[static_cast<std::size_t>(e)]);
  if (renorm) {
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    for (double& x : w) x /= total;
  }
}

TEST(Router, MatchesReferenceForEveryK) {
  for (const std::int32_t E : {1, 8, 60}) {
    Rng rng(static_cast<std::uint64_t>(E));
    const std::int64_t tokens = 5;
    const std::vector<float> logits = rng.uniform_vector(static_cast<std::size_t>(tokens * E), -4.0f, 4.0f);
    for (std::int32_t k = 1; k <= E; ++k)
      for (const bool renorm : {false, true}) {
        SCOPED_TRACE("E=" + std::to_string(E) + " k=" + std::to_string(k) + (renorm ? " renorm" : ""));
        std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens * k), -1);
        std::vector<float> w(ids.size(), NAN);
        kernels::router_topk(logits.data(), tokens, E, k, renorm, ids.data(), w.data());
        for (std::int64_t t = 0; t < tokens; ++t) {
          std::vector<std::int32_t> ref_ids;
          std::vector<double> ref_w;
          ref_router(logits.data() + t * E, E, k, renorm, ref_ids, ref_w);
          for (std::int32_t i = 0; i < k; ++i) {
            const auto at = static_cast<std::size_t>(t * k + i);
            ASSERT_EQ(ids[at], ref_ids[static_cast<std::size_t>(i)]) << "token " << t << " rank " << i;
            ASSERT_NEAR(w[at], ref_w[static_cast<std::size_t>(i)], 1e-6 * ref_w[static_cast<std::size_t>(i)] + 1e-12);
          }
        }
      }
  }
}

TEST(Router, TiesGoToTheLowerExpertId) {
  const float logits[] = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f, 2.0f};
  std::int32_t ids[5];
  float w[5];
  kernels::router_topk(logits, 1, 6, 5, false, ids, w);
  EXPECT_EQ(std::vector<std::int32_t>(ids, ids + 5), (std::vector<std::int32_t>{1, 2, 4, 3, 5}));
  EXPECT_EQ(w[0], w[1]);
  EXPECT_EQ(w[1], w[2]);
  // All equal: ids in order.
  const float flat[] = {0.5f, 0.5f, 0.5f, 0.5f};
  kernels::router_topk(flat, 1, 4, 2, true, ids, w);
  EXPECT_EQ(ids[0], 0);
  EXPECT_EQ(ids[1], 1);
  EXPECT_FLOAT_EQ(w[0], 0.5f);
}

TEST(Router, RenormalisedWeightsSumToOneAndKeepRatios) {
  Rng rng(4);
  const std::vector<float> logits = rng.uniform_vector(2 * 8, -2.0f, 2.0f);  // 2 tokens, 8 experts
  std::int32_t ids_raw[4], ids_norm[4];
  float raw[4], norm[4];
  kernels::router_topk(logits.data(), 2, 8, 2, false, ids_raw, raw);
  kernels::router_topk(logits.data(), 2, 8, 2, true, ids_norm, norm);
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(ids_raw[2 * t], ids_norm[2 * t]);
    EXPECT_EQ(ids_raw[2 * t + 1], ids_norm[2 * t + 1]);
    EXPECT_NEAR(norm[2 * t] + norm[2 * t + 1], 1.0f, 1e-6f);
    EXPECT_NEAR(norm[2 * t] / norm[2 * t + 1], raw[2 * t] / raw[2 * t + 1], 1e-5f);
    EXPECT_LT(raw[2 * t] + raw[2 * t + 1], 0.99f);  // without renormalisation the mass is partial
  }
}

}  // namespace
}  // namespace sy::test
