// The skew router: exponential popularity per block, sampling without replacement that matches
// it empirically, distinct picks, positive normalised weights, and routing as a pure function
// of (seed, block, token key).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>
#include <vector>

#include "engine/sim/skew_router.h"

namespace sy {
namespace {

TEST(SkewRouter, PopularityDecaysExponentiallyWithRank) {
  const double lambda = 0.5;
  SkewRouter r(4, 8, lambda, 1);
  // Hand-computed: Z = sum_{r<8} e^{-r/2} = (1 - e^{-4}) / (1 - e^{-1/2}) = 2.4962...
  const double z = (1 - std::exp(-4.0)) / (1 - std::exp(-0.5));
  for (std::int32_t b = 0; b < 4; ++b) {
    const auto& pop = r.popularity(b);
    const auto& order = r.ranking(b);
    ASSERT_EQ(pop.size(), 8u);
    EXPECT_NEAR(std::accumulate(pop.begin(), pop.end(), 0.0), 1.0, 1e-12);
    std::set<std::int32_t> ids(order.begin(), order.end());
    EXPECT_EQ(ids.size(), 8u);
    EXPECT_EQ(*ids.begin(), 0);
    EXPECT_EQ(*ids.rbegin(), 7);
    for (std::int32_t rank = 0; rank < 8; ++rank)
      EXPECT_NEAR(pop[static_cast<std::size_t>(order[static_cast<std::size_t>(rank)])], std::exp(-lambda * rank) / z, 1e-12);
  }
}

TEST(SkewRouter, EachBlockHasItsOwnHotExperts) {
  SkewRouter r(8, 16, 1.0, 3);
  std::set<std::vector<std::int32_t>> orders;
  for (std::int32_t b = 0; b < 8; ++b) orders.insert(r.ranking(b));
  EXPECT_GT(orders.size(), 1u);
  SkewRouter other_seed(8, 16, 1.0, 4);
  EXPECT_NE(r.ranking(0), other_seed.ranking(0));
}

TEST(SkewRouter, LambdaZeroIsUniform) {
  SkewRouter r(2, 8, 0.0, 9);
  for (double p : r.popularity(1)) EXPECT_EQ(p, 1.0 / 8);
  std::int32_t ids[3];
  float w[3];
  std::vector<std::int64_t> count(8, 0);
  const std::int64_t n = 80000;
  for (std::int64_t key = 0; key < n; ++key) {
    r.route(1, static_cast<std::uint64_t>(key), 3, ids, w);
    for (int j = 0; j < 3; ++j) {
      EXPECT_FLOAT_EQ(w[j], 1.0f / 3);
      ++count[static_cast<std::size_t>(ids[j])];
    }
  }
  // Each expert is in 3/8 of the tokens; sd of the fraction ~0.0017: allow 0.006.
  for (std::int64_t c : count) EXPECT_NEAR(static_cast<double>(c) / n, 3.0 / 8, 0.006);
}

// Top-1 picks follow popularity. With 200 000 keys the standard deviation of a frequency is at
// most 0.0011; the bound 0.005 is over 4 sigma (and the seed is fixed, so it cannot flake).
TEST(SkewRouter, TopOneFrequenciesMatchPopularity) {
  SkewRouter r(2, 8, 0.6, 11);
  const std::int64_t n = 200000;
  std::vector<std::int64_t> count(8, 0);
  std::int32_t id;
  float w;
  for (std::int64_t key = 0; key < n; ++key) {
    r.route(0, static_cast<std::uint64_t>(key) * 7919u, 1, &id, &w);
    ASSERT_EQ(w, 1.0f);
    ++count[static_cast<std::size_t>(id)];
  }
  for (std::int32_t e = 0; e < 8; ++e)
    EXPECT_NEAR(static_cast<double>(count[e]) / n, r.popularity(0)[e], 0.005) << "expert " << e;
}

// Top-2 without replacement: P(e picked) = p_e + sum_{j != e} p_j * p_e / (1 - p_j).
TEST(SkewRouter, TopTwoInclusionMatchesSamplingWithoutReplacement) {
  SkewRouter r(1, 6, 0.8, 5);
  const auto& p = r.popularity(0);
  const std::int64_t n = 200000;
  std::vector<std::int64_t> count(6, 0);
  std::int32_t ids[2];
  float w[2];
  for (std::int64_t key = 0; key < n; ++key) {
    r.route(0, static_cast<std::uint64_t>(key), 2, ids, w);
    ++count[static_cast<std::size_t>(ids[0])];
    ++count[static_cast<std::size_t>(ids[1])];
  }
  for (std::size_t e = 0; e < 6; ++e) {
    double expected = p[e];
    for (std::size_t j = 0; j < 6; ++j)
      if (j != e) expected += p[j] * p[e] / (1 - p[j]);
    EXPECT_NEAR(static_cast<double>(count[e]) / n, expected, 0.005) << "expert " << e;
  }
}

TEST(SkewRouter, PicksAreDistinctAndWeightsPositiveSummingToOne) {
  for (double lambda : {0.0, 0.3, 2.0, 50.0, 1000.0}) {
    SkewRouter r(3, 16, lambda, 21);
    std::vector<std::int32_t> ids(16);
    std::vector<float> w(16);
    for (std::int32_t k = 1; k <= 16; ++k) {
      for (std::uint64_t key = 0; key < 200; ++key) {
        r.route(2, key, k, ids.data(), w.data());
        std::set<std::int32_t> distinct(ids.begin(), ids.begin() + k);
        ASSERT_EQ(distinct.size(), static_cast<std::size_t>(k)) << "lambda " << lambda << " k " << k;
        ASSERT_GE(*distinct.begin(), 0);
        ASSERT_LT(*distinct.rbegin(), 16);
        double sum = 0;
        for (std::int32_t j = 0; j < k; ++j) {
          ASSERT_GT(w[j], 0.0f) << "lambda " << lambda << " k " << k;
          sum += w[j];
        }
        ASSERT_NEAR(sum, 1.0, 1e-6);
      }
    }
  }
}

TEST(SkewRouter, WeightsAreProportionalToPopularity) {
  SkewRouter r(1, 8, 0.7, 2);
  std::int32_t ids[3];
  float w[3];
  for (std::uint64_t key = 0; key < 100; ++key) {
    r.route(0, key, 3, ids, w);
    const auto& p = r.popularity(0);
    const double total = p[ids[0]] + p[ids[1]] + p[ids[2]];
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(w[j], p[ids[j]] / total, 1e-6);
  }
}

TEST(SkewRouter, ExtremeSkewAlwaysPicksTheHottestFirst) {
  SkewRouter r(2, 8, 1000.0, 8);
  std::int32_t ids[2];
  float w[2];
  for (std::uint64_t key = 0; key < 100; ++key) {
    r.route(1, key, 2, ids, w);
    EXPECT_EQ(ids[0], r.ranking(1)[0]);
    EXPECT_EQ(ids[1], r.ranking(1)[1]);
    EXPECT_FLOAT_EQ(w[0], 1.0f / (1.0f + 1e-6f));  // the second weight is floored at 1e-6
  }
}

TEST(SkewRouter, RoutingIsAPureFunctionOfSeedBlockAndKey) {
  SkewRouter a(4, 8, 0.5, 77);
  SkewRouter b(4, 8, 0.5, 77);
  const auto route = [](const SkewRouter& r, std::int32_t block, std::uint64_t key) {
    std::vector<std::int32_t> ids(2);
    std::vector<float> w(2);
    r.route(block, key, 2, ids.data(), w.data());
    return std::make_pair(ids, w);
  };
  // b sees the same tokens in the opposite order, interleaved with other blocks.
  std::vector<std::pair<std::vector<std::int32_t>, std::vector<float>>> forward, backward;
  for (std::uint64_t key = 0; key < 500; ++key) forward.push_back(route(a, 3, key));
  for (std::uint64_t key = 500; key-- > 0;) {
    (void)route(b, 1, key);
    backward.push_back(route(b, 3, key));
  }
  std::reverse(backward.begin(), backward.end());
  EXPECT_EQ(forward, backward);

  // Another seed or block routes differently (for most keys).
  SkewRouter c(4, 8, 0.5, 78);
  int differ_seed = 0, differ_block = 0;
  for (std::uint64_t key = 0; key < 500; ++key) {
    differ_seed += route(c, 3, key).first != forward[key].first;
    differ_block += route(a, 2, key).first != forward[key].first;
  }
  EXPECT_GT(differ_seed, 250);
  EXPECT_GT(differ_block, 250);
}

// Rows of (request, position), as an attention batch holds them.
std::vector<TokenRow> token_rows(const std::vector<std::int64_t>& request, const std::vector<std::int32_t>& position) {
  std::vector<TokenRow> rows;
  for (std::size_t i = 0; i < request.size(); ++i) rows.push_back({.request = request[i], .position = position[i]});
  return rows;
}

TEST(SkewRouter, RoutingRowsAtOnceEqualsRoutingEachRow) {
  // The simulator routes an attention execution's rows in one call: bit for bit what one call
  // per token gives, for top-1, top-2 and a wide top-k, skewed and uniform.
  for (const auto& [experts, k, lambda] : {std::tuple{8, 2, 0.5}, std::tuple{8, 1, 0.0}, std::tuple{128, 8, 2.0}}) {
    SkewRouting routing(3, experts, lambda, 11);
    const std::vector<std::int64_t> request = {0, 0, 7, 42, 42, 42, 1000003};
    const std::vector<std::int32_t> position = {0, 1, 5, 17, 18, 19, 4095};
    const auto rows = static_cast<std::int64_t>(request.size());
    for (std::int32_t b = 0; b < 3; ++b) {
      std::vector<std::int32_t> ids(static_cast<std::size_t>(rows * k), -1), one_ids(static_cast<std::size_t>(k));
      std::vector<float> w(ids.size(), -1.0f), one_w(static_cast<std::size_t>(k));
      routing.route_rows(b, token_rows(request, position).data(), rows, k, ids.data(), w.data());
      for (std::int64_t i = 0; i < rows; ++i) {
        const auto row = static_cast<std::size_t>(i);
        routing.route(b, request[row], position[row], k, one_ids.data(), one_w.data());
        for (std::int32_t j = 0; j < k; ++j) {
          const auto at = row * static_cast<std::size_t>(k) + static_cast<std::size_t>(j);
          EXPECT_EQ(ids[at], one_ids[static_cast<std::size_t>(j)]) << "block " << b << " row " << i;
          EXPECT_EQ(w[at], one_w[static_cast<std::size_t>(j)]) << "block " << b << " row " << i;
        }
      }
    }
  }
}

TEST(SkewRouter, DrawsAreTheSameNumbersAsTheFirstImplementation) {
  // Every simulated result depends on the router's draws, so a faster router must pick the same
  // experts with the same weights, bit for bit. The digests were recorded from the sampling loop
  // of main at 819eb43 (one flag buffer, a double comparison per alias draw), before the top-2
  // and small-k paths: skewed, uniform, the 64-draw fallback scan (lambda 30), underflowed tails
  // (lambda 800 and 1000), k = E, more than 1024 experts, and a wide k over stack flags.
  struct Case {
    std::int32_t experts, k;
    double lambda;
    std::uint64_t digest;
  };
  const Case cases[] = {
      {8, 2, 0.5, 0x055413b39778483aULL},
      {8, 1, 0, 0xd63d32622eca0037ULL},
      {8, 2, 0, 0x9c1cfc6c48561731ULL},
      {8, 3, 1, 0x100b476763d76cb9ULL},
      {128, 8, 0.5, 0x79e9e70c3af335faULL},
      {128, 8, 2, 0x67f985334b4d6129ULL},
      {128, 2, 30, 0x3c7ba09b1583bd03ULL},
      {8, 2, 1000, 0xfc25cdcc91ccb443ULL},
      {16, 16, 3, 0x8a2602a08cfdb0a7ULL},
      {2000, 2, 0.01, 0xf8e7b18752bbae63ULL},
      {2000, 20, 0.02, 0xd807236946fb2152ULL},
      {64, 6, 800, 0x3310697c8cd81363ULL},
      {256, 24, 0.3, 0x216145a7fb191d6dULL},
  };
  std::vector<std::int64_t> request;
  std::vector<std::int32_t> position;
  for (std::int32_t i = 0; i < 400; ++i) {
    request.push_back(i * 7919 % 1013);
    position.push_back(i % 300);
  }
  for (const Case& c : cases) {
    SkewRouting routing(3, c.experts, c.lambda, 5);
    std::vector<std::int32_t> ids(request.size() * static_cast<std::size_t>(c.k));
    std::vector<float> w(ids.size());
    std::uint64_t digest = 1469598103934665603ULL;  // FNV-1a over (id, weight bits)
    for (std::int32_t b = 0; b < 3; ++b) {
      routing.route_rows(b, token_rows(request, position).data(), static_cast<std::int64_t>(request.size()), c.k,
                         ids.data(), w.data());
      for (std::size_t i = 0; i < ids.size(); ++i) {
        digest = (digest ^ static_cast<std::uint32_t>(ids[i])) * 1099511628211ULL;
        digest = (digest ^ std::bit_cast<std::uint32_t>(w[i])) * 1099511628211ULL;
      }
    }
    EXPECT_EQ(digest, c.digest) << c.experts << " experts, top-" << c.k << ", lambda " << c.lambda;
  }
}

TEST(SkewRouter, TokenKeysDifferPerRequestAndPosition) {
  std::set<std::uint64_t> keys;
  for (std::int64_t req = 0; req < 100; ++req)
    for (std::int32_t pos = 0; pos < 100; ++pos) keys.insert(skew_token_key(req, pos));
  EXPECT_EQ(keys.size(), 10000u);
  EXPECT_EQ(skew_token_key(5, 9), skew_token_key(5, 9));
}

TEST(SkewRouter, ParseSkew) {
  EXPECT_EQ(parse_skew("exp:0").value(), 0.0);
  EXPECT_EQ(parse_skew("exp:0.5").value(), 0.5);
  EXPECT_EQ(parse_skew("exp:1e-1").value(), 0.1);
  EXPECT_EQ(parse_skew("exp:3").value(), 3.0);
  EXPECT_FALSE(std::signbit(parse_skew("exp:-0").value()));
  for (const char* bad : {"", "exp", "exp:", "exp:-1", "exp:abc", "exp:1x", "exp: 1", "lin:1", "EXP:1", "exp:inf",
                          "exp:nan", "0.5"}) {
    auto s = parse_skew(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().message(),
              "bad skew '" + std::string(bad) + "': expected exp:<lambda> with a number lambda >= 0 (exp:0 is uniform)");
  }
}

}  // namespace
}  // namespace sy
