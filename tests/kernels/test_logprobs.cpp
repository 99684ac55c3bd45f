// token_logprobs against a naive log_softmax in long double: the chosen token's value, the
// top alternatives' order and values, ties, ranks, -inf and NaN logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/logprobs.h"

namespace sy::test {
namespace {

std::vector<long double> naive_log_softmax(const std::vector<float>& logits) {
  long double total = 0;
  for (float l : logits) total += std::exp(static_cast<long double>(l));
  std::vector<long double> out;
  for (float l : logits) out.push_back(static_cast<long double>(l) - std::log(total));
  return out;
}

TEST(TokenLogprobs, MatchesNaiveLogSoftmax) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (std::int32_t vocab : {1, 5, 257, 32000}) {
    std::vector<float> logits(static_cast<std::size_t>(vocab));
    for (float& l : logits) l = dist(rng);
    const std::vector<long double> want = naive_log_softmax(logits);
    std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b]; });
    for (std::int32_t top : {0, 1, 5, 20}) {
      const std::int32_t token = vocab / 2;
      kernels::TokenLogprobs got;
      kernels::token_logprobs(logits.data(), vocab, token, top, got);
      EXPECT_EQ(got.token, token);
      EXPECT_NEAR(got.logprob, static_cast<double>(want[static_cast<std::size_t>(token)]), 1e-5) << "vocab " << vocab;
      ASSERT_EQ(got.top.size(), static_cast<std::size_t>(std::min(top, vocab)));
      for (std::size_t i = 0; i < got.top.size(); ++i) {
        EXPECT_EQ(got.top[i].first, order[i]) << "rank " << i << " of vocab " << vocab;
        EXPECT_NEAR(got.top[i].second, static_cast<double>(want[static_cast<std::size_t>(order[i])]), 1e-5);
        EXPECT_LE(got.top[i].second, 0.0f);
      }
    }
  }
}

TEST(TokenLogprobs, TiesGoToTheLowerIdAndProbabilitiesSumToOne) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
  kernels::TokenLogprobs got;
  kernels::token_logprobs(logits.data(), 5, 0, 5, got);
  ASSERT_EQ(got.top.size(), 5u);
  EXPECT_EQ(got.top[0].first, 1);
  EXPECT_EQ(got.top[1].first, 3);
  EXPECT_EQ(got.top[2].first, 4);
  EXPECT_EQ(got.top[3].first, 2);
  EXPECT_EQ(got.top[4].first, 0);
  double total = 0;
  for (const auto& [id, lp] : got.top) total += std::exp(static_cast<double>(lp));
  EXPECT_NEAR(total, 1.0, 1e-6);
}

// vLLM's rank: the tokens at least as likely as this one, itself included; ties count against it.
TEST(TokenLogprobs, RankCountsTheTokensAtLeastAsLikely) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f};
  kernels::TokenLogprobs got;
  const std::vector<std::int32_t> want = {5, 3, 4, 3, 3};
  for (std::int32_t token = 0; token < 5; ++token) {
    kernels::token_logprobs(logits.data(), 5, token, 0, got);
    EXPECT_EQ(got.rank, want[static_cast<std::size_t>(token)]) << "token " << token;
  }
  const std::vector<float> nan_logits = {NAN, 0.0f, -INFINITY};
  kernels::token_logprobs(nan_logits.data(), 3, 1, 0, got);
  EXPECT_EQ(got.rank, 1);
  kernels::token_logprobs(nan_logits.data(), 3, 0, 0, got);  // impossible: every token is as likely
  EXPECT_EQ(got.rank, 3);
}

TEST(TokenLogprobs, MinusInfinityAndNanAreImpossibleTokens) {
  const std::vector<float> logits = {-INFINITY, 0.0f, NAN, 0.0f};
  kernels::TokenLogprobs got;
  kernels::token_logprobs(logits.data(), 4, 2, 3, got);
  EXPECT_TRUE(std::isinf(got.logprob) && got.logprob < 0);
  ASSERT_EQ(got.top.size(), 3u);
  EXPECT_EQ(got.top[0].first, 1);
  EXPECT_NEAR(got.top[0].second, std::log(0.5), 1e-6);
  EXPECT_EQ(got.top[1].first, 3);
  EXPECT_TRUE(std::isinf(got.top[2].second));
}

}  // namespace
}  // namespace sy::test
