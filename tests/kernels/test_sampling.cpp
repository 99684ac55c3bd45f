// argmax and the seeded Sampler: greedy, determinism, top-k / top-p cuts, and that the
// empirical distribution is the softmax it should be (fixed seeds: these cannot flake).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/sampling.h"
#include "tests/kernels/reference.h"

namespace sy::test {
namespace {

using kernels::Sampler;
using kernels::SamplingParams;

TEST(Argmax, FirstMaximumWinsAndNanCountsAsMaximum) {
  const float ties[] = {1.0f, 5.0f, 5.0f, 2.0f, 5.0f};
  EXPECT_EQ(kernels::argmax(ties, 5), 1);
  const float single[] = {-3.0f};
  EXPECT_EQ(kernels::argmax(single, 1), 0);
  const float negative[] = {-5.0f, -1.0f, -INFINITY, -1.0f};
  EXPECT_EQ(kernels::argmax(negative, 4), 1);
  const float with_nan[] = {1.0f, 9.0f, NAN, 10.0f, NAN};  // torch.argmax: the first NaN
  EXPECT_EQ(kernels::argmax(with_nan, 5), 2);
}

TEST(Sampler, ZeroTemperatureIsGreedy) {
  Rng rng(1);
  Sampler s({0.0f, 0.5f, 3}, 123);
  for (int i = 0; i < 50; ++i) {
    const std::vector<float> logits = rng.uniform_vector(100, -5.0f, 5.0f);
    ASSERT_EQ(s.sample(logits.data(), 100), kernels::argmax(logits.data(), 100));
  }
}

std::vector<std::int32_t> draws(SamplingParams p, std::uint64_t seed, const std::vector<float>& logits, int n) {
  Sampler s(p, seed);
  std::vector<std::int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.sample(logits.data(), static_cast<std::int32_t>(logits.size())));
  return out;
}

TEST(Sampler, SameSeedReplaysDifferentSeedDiffers) {
  Rng rng(2);
  const std::vector<float> logits = rng.uniform_vector(50, -1.0f, 1.0f);
  for (const SamplingParams p : {SamplingParams{1.0f, 1.0f, 0}, SamplingParams{0.8f, 0.9f, 0}, SamplingParams{1.3f, 1.0f, 10}}) {
    const auto a = draws(p, 77, logits, 200);
    EXPECT_EQ(a, draws(p, 77, logits, 200));
    EXPECT_NE(a, draws(p, 78, logits, 200));
  }
}

TEST(Sampler, TinyTopPAndTopKOneAreGreedy) {
  Rng rng(3);
  Sampler tiny_p({1.0f, 1e-6f, 0}, 5);
  Sampler top1({1.5f, 1.0f, 1}, 6);
  for (int i = 0; i < 200; ++i) {
    std::vector<float> logits = rng.uniform_vector(1000, -2.0f, 2.0f);
    if (i % 4 == 0) logits[999] = logits[static_cast<std::size_t>(kernels::argmax(logits.data(), 1000))];  // a tie
    const std::int32_t best = kernels::argmax(logits.data(), 1000);
    ASSERT_EQ(tiny_p.sample(logits.data(), 1000), best);
    ASSERT_EQ(top1.sample(logits.data(), 1000), best);
  }
}

// Pearson's chi-square statistic of observed counts against expected probabilities.
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  double chi = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.0) {
      if (counts[i] != 0) return INFINITY;
      continue;
    }
    const double e = p[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p(logits.size());
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i) sum += (p[i] = std::exp((logits[i] - m) / temperature));
  for (double& x : p) x /= sum;
  return p;
}

std::vector<int> histogram(SamplingParams params, std::uint64_t seed, const std::vector<float>& logits, int n) {
  std::vector<int> counts(logits.size());
  Sampler s(params, seed);
  for (int i = 0; i < n; ++i) ++counts[static_cast<std::size_t>(s.sample(logits.data(), static_cast<std::int32_t>(logits.size())))];
  return counts;
}

// With 5 degrees of freedom, P(χ² > 25) ≈ 1.4e-4: a correct sampler passes at this fixed seed,
// a wrong temperature or an off-by-one in the inverse CDF gives χ² in the hundreds.
TEST(Sampler, EmpiricalDistributionMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f};
  const int n = 60000;
  for (const float temperature : {1.0f, 0.7f, 2.0f}) {
    const auto counts = histogram({temperature, 1.0f, 0}, 2024, logits, n);
    EXPECT_LT(chi_square(counts, softmax(logits, temperature), n), 25.0) << "temperature " << temperature;
  }
  // The statistic does detect a wrong distribution (temperature 1 sampled, 0.7 expected).
  EXPECT_GT(chi_square(histogram({1.0f, 1.0f, 0}, 2024, logits, n), softmax(logits, 0.7), n), 100.0);
}

TEST(Sampler, TopKKeepsOnlyTheBestAndRenormalises) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f};
  const int n = 30000;
  const auto counts = histogram({1.0f, 1.0f, 3}, 99, logits, n);
  std::vector<double> p = softmax(logits, 1.0);
  for (const std::size_t cut : {2u, 3u, 5u}) p[cut] = 0.0;  // the best three are ids 1, 4, 0
  const double kept = p[0] + p[1] + p[4];
  for (double& x : p) x /= kept;
  EXPECT_LT(chi_square(counts, p, n), 20.0);  // 2 degrees of freedom, P(χ² > 20) ≈ 5e-5
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: top_p = 0.75 needs {0, 1} (0.8 ≥ 0.75).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  const int n = 30000;
  const auto counts = histogram({1.0f, 0.75f, 0}, 7, logits, n);
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_LT(chi_square(counts, {0.625, 0.375, 0.0, 0.0}, n), 15.0);  // 1 dof, P ≈ 1e-4
  // top_p exactly at a cumulative boundary keeps that prefix (0.5 + 0.3 + 0.15 = 0.95).
  const auto wider = histogram({1.0f, 0.95f, 0}, 8, logits, 3000);
  EXPECT_EQ(wider[3], 0);
  EXPECT_GT(wider[2], 0);
}

// vLLM's min-p: probabilities 0.5, 0.3, 0.15, 0.05 and min_p 0.35 keep the tokens of at least
// 0.35 · 0.5 = 0.175, renormalised; min_p 1 keeps the most likely token only.
TEST(Sampler, MinPKeepsTokensAboveTheScaledMaximum) {
  const std::vector<float> logits = {std::log(0.3f), std::log(0.5f), std::log(0.05f), std::log(0.15f)};
  const int n = 30000;
  SamplingParams p{1.0f, 1.0f, 0};
  p.min_p = 0.35f;
  const auto counts = histogram(p, 5, logits, n);
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_LT(chi_square(counts, {0.375, 0.625, 0.0, 0.0}, n), 15.0);  // 1 dof, P ≈ 1e-4
  p.min_p = 1.0f;
  const auto greedy = histogram(p, 6, logits, 500);
  EXPECT_EQ(greedy[1], 500);
  // With a top-k or top-p cut too, the cut path applies the same min-p.
  p.min_p = 0.35f;
  p.top_k = 3;
  const auto cut = histogram(p, 7, logits, n);
  EXPECT_EQ(cut[2] + cut[3], 0);
  EXPECT_LT(chi_square(cut, {0.375, 0.625, 0.0, 0.0}, n), 15.0);
}

// vLLM applies min-p before top-p: probabilities 0.4, 0.3, 0.2, 0.1 with min_p 0.3 keep the
// first three (at least 0.12), renormalised to 0.444, 0.333, 0.222; top_p 0.75 then keeps two
// (0.778 ≥ 0.75). Top-p first would keep three (0.9 ≥ 0.75), which min-p would not cut.
TEST(Sampler, MinPComesBeforeTopP) {
  const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  SamplingParams p{1.0f, 0.75f, 0};
  p.min_p = 0.3f;
  const int n = 20000;
  const auto counts = histogram(p, 11, logits, n);
  EXPECT_EQ(counts[2] + counts[3], 0);
  EXPECT_LT(chi_square(counts, {4.0 / 7.0, 3.0 / 7.0, 0.0, 0.0}, n), 15.0);
}

// penalize: apply_penalties over the terms of (prompt, outputs) under p.
std::vector<float> penalized(std::vector<float> logits, const std::vector<std::int32_t>& prompt,
                             const std::vector<std::int32_t>& outputs, const kernels::Penalties& p) {
  kernels::apply_penalties(logits.data(), static_cast<std::int32_t>(logits.size()),
                           kernels::penalty_terms(prompt, outputs, p), p);
  return logits;
}

TEST(Penalties, TermsCountTheOutputsAndTakeThePromptUnderARepetitionPenalty) {
  const std::vector<std::int32_t> prompt = {7, 2, 7}, outputs = {3, 5, 3, 7, 3};
  auto terms = kernels::penalty_terms(prompt, outputs, {0.5f, 0.0f, 1.0f});
  ASSERT_EQ(terms.size(), 3u);  // the outputs' tokens only, in token order
  EXPECT_EQ(terms[0].token, 3);
  EXPECT_EQ(terms[0].count, 3);
  EXPECT_EQ(terms[1].token, 5);
  EXPECT_EQ(terms[2].token, 7);
  EXPECT_EQ(terms[2].count, 1);
  terms = kernels::penalty_terms(prompt, outputs, {0.0f, 0.0f, 1.2f});
  ASSERT_EQ(terms.size(), 4u);  // and the prompt's, with count 0 when only there
  EXPECT_EQ(terms[0].token, 2);
  EXPECT_EQ(terms[0].count, 0);
  EXPECT_EQ(terms[3].token, 7);
  EXPECT_EQ(terms[3].count, 1);
  EXPECT_TRUE(kernels::penalty_terms(prompt, outputs, {}).empty());
}

TEST(Penalties, FrequencyTimesCountThenPresenceOnTheOutputsTokens) {
  const std::vector<std::int32_t> outputs = {3, 5, 3, 7, 3};
  EXPECT_EQ(penalized(std::vector<float>(8, 1.0f), {1}, outputs, {0.5f, 0.25f, 1.0f}),
            (std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f - 0.75f - 0.5f, 1.0f, 1.0f - 0.25f - 0.5f, 1.0f,
                                1.0f - 0.25f - 0.5f}));
  // Negative penalties favour repeats; no penalties and no outputs change nothing.
  EXPECT_EQ(penalized(std::vector<float>(8, 0.0f), {}, outputs, {-1.0f, 0.0f, 1.0f})[3], 1.0f);
  EXPECT_EQ(penalized(std::vector<float>(8, 2.0f), {1}, outputs, {}), std::vector<float>(8, 2.0f));
  EXPECT_EQ(penalized(std::vector<float>(8, 2.0f), {}, {}, {1.0f, 1.0f, 1.0f}), std::vector<float>(8, 2.0f));
}

// vLLM's repetition penalty: a positive logit of a prompt or output token is divided by r,
// a negative one multiplied by r, before the frequency and presence terms (outputs only).
TEST(Penalties, RepetitionScalesThePromptsAndOutputsTokensFirst) {
  const std::vector<float> logits = {2.0f, -2.0f, 3.0f, -1.0f, 0.0f, 4.0f};
  const std::vector<float> got = penalized(logits, {0, 1, 4}, {2, 3, 2}, {0.1f, 0.5f, 2.0f});
  EXPECT_EQ(got[0], 2.0f / 2.0f);
  EXPECT_EQ(got[1], -2.0f * 2.0f);
  EXPECT_EQ(got[2], 3.0f / 2.0f - 0.5f * 2.0f - 0.1f);
  EXPECT_EQ(got[3], -1.0f * 2.0f - 0.5f - 0.1f);
  EXPECT_EQ(got[4], 0.0f);  // zero is not positive: multiplied by r, still zero
  EXPECT_EQ(got[5], 4.0f);  // in neither
  // Divided, as vLLM's torch.where(logits > 0, logits / r, logits * r), not multiplied by the
  // reciprocal, which differs in the last bit: 4.125 / 1.3 is 3.17307711, 4.125 · (1 / 1.3) 3.17307687.
  const float r = 1.3f;
  EXPECT_EQ(penalized({4.125f}, {0}, {}, {0.0f, 0.0f, r})[0], 4.125f / r);
  EXPECT_NE(penalized({4.125f}, {0}, {}, {0.0f, 0.0f, r})[0], 4.125f * (1.0f / r));
  // A token id outside the row is skipped, not written.
  std::vector<float> row = {1.0f, 1.0f};
  const kernels::PenaltyTerm outside[] = {{5, 1}, {-1, 1}};
  kernels::apply_penalties(row.data(), 2, outside, {1.0f, 1.0f, 2.0f});
  EXPECT_EQ(row, (std::vector<float>{1.0f, 1.0f}));
}

// The draw is documented: u = (rng() >> 11)·2⁻⁵³ from std::mt19937_64(seed), then the inverse
// CDF in token order (no cuts) or in descending order (cuts). Recomputing it here pins the
// exact tokens, which is what makes replays identical across standard libraries.
TEST(Sampler, DrawFollowsTheDocumentedInverseCdf) {
  Rng rng(12);
  const std::vector<float> logits = rng.uniform_vector(5000, -3.0f, 3.0f);
  const float temperature = 0.9f;
  for (const SamplingParams p : {SamplingParams{temperature, 1.0f, 0}, SamplingParams{temperature, 0.9f, 0},
                                 SamplingParams{temperature, 0.5f, 40}}) {
    Sampler sampler(p, 31337);
    std::mt19937_64 gen(31337);
    const float m = *std::max_element(logits.begin(), logits.end()) / temperature;
    auto weight = [&](std::int32_t i) { return static_cast<double>(std::exp(logits[static_cast<std::size_t>(i)] / temperature - m)); };
    std::vector<std::int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    const bool cut = p.top_p < 1.0f || p.top_k > 0;
    if (cut) {
      std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
        return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)] ||
               (logits[static_cast<std::size_t>(a)] == logits[static_cast<std::size_t>(b)] && a < b);
      });
      if (p.top_k > 0) order.resize(static_cast<std::size_t>(p.top_k));
      double total = 0.0;
      for (const std::int32_t i : order) total += weight(i);
      double acc = 0.0;
      std::size_t keep = order.size();
      for (std::size_t j = 0; j < order.size(); ++j) {
        acc += weight(order[j]);
        if (acc >= static_cast<double>(p.top_p) * total) {
          keep = j + 1;
          break;
        }
      }
      order.resize(keep);
    }
    for (int draw = 0; draw < 300; ++draw) {
      const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53;
      double total = 0.0;
      for (const std::int32_t i : order) total += weight(i);
      double acc = 0.0;
      std::int32_t expected = order.back();
      for (const std::int32_t i : order) {
        acc += weight(i);
        if (u * total < acc) {
          expected = i;
          break;
        }
      }
      ASSERT_EQ(sampler.sample(logits.data(), 5000), expected) << "draw " << draw << " top_p " << p.top_p;
    }
  }
}

}  // namespace
}  // namespace sy::test
