// Rotary embeddings against the transformers formula (rotate_half layout, float32 angles).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/rope.h"
#include "tests/kernels/reference.h"

namespace sy::test {
namespace {

// transformers' LlamaRotaryEmbedding + apply_rotary_pos_emb, written out: inv_freq and the
// angle are float32 (as torch computes them); cos, sin and the rotation are then evaluated in
// double so the only float32 rounding shared with the kernel is the angle's.
std::vector<double> ref_rope(const std::vector<float>& x, std::int64_t tokens, std::int32_t heads, std::int32_t dim,
                             double theta, const std::vector<std::int32_t>& pos, bool float_angle = true) {
  std::vector<double> y(x.size());
  const std::int32_t half = dim / 2;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int32_t i = 0; i < half; ++i) {
      const float inv_freq = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(2 * i) / static_cast<float>(dim));
      const double angle = float_angle ? static_cast<double>(static_cast<float>(pos[static_cast<std::size_t>(t)]) * inv_freq)
                                       : pos[static_cast<std::size_t>(t)] / std::pow(theta, 2.0 * i / dim);
      const double c = std::cos(angle), s = std::sin(angle);
      for (std::int32_t h = 0; h < heads; ++h) {
        const auto base = static_cast<std::size_t>((t * heads + h) * dim);
        const double a = x[base + static_cast<std::size_t>(i)];
        const double b = x[base + static_cast<std::size_t>(i + half)];
        y[base + static_cast<std::size_t>(i)] = a * c - b * s;           // x·cos + (−x2)·sin
        y[base + static_cast<std::size_t>(i + half)] = b * c + a * s;    // x2·cos + x1·sin
      }
    }
  return y;
}

struct RopeCase {
  std::int32_t head_dim;
  std::int32_t heads;
  double theta;
};

class RopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeTest, MatchesTransformersFormula) {
  const auto [dim, heads, theta] = GetParam();
  Rng rng(static_cast<std::uint64_t>(dim * 31 + heads));
  const std::vector<std::int32_t> pos = {0, 1, 2, 17, 5, 4095, 300};  // not monotonic on purpose
  const auto tokens = static_cast<std::int64_t>(pos.size());
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(tokens * heads * dim));
  std::vector<float> y = x;
  kernels::Rope rope(dim, theta);
  EXPECT_EQ(rope.head_dim(), dim);
  rope.apply(y.data(), tokens, heads, pos.data());
  EXPECT_LT(nmse(y, ref_rope(x, tokens, heads, dim, theta, pos)), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeTest,
                         ::testing::Values(RopeCase{2, 1, 10000.0}, RopeCase{64, 4, 10000.0},
                                           RopeCase{128, 3, 1000000.0}, RopeCase{80, 2, 500000.0}));

// A scaled variant (engine/model/rope_scaling.h) hands the kernel its own frequencies and a
// factor for cos and sin: transformers' `emb.cos() * attention_scaling`, a float32 product.
TEST(Rope, ScalesCosAndSinByTheAttentionFactor) {
  Rng rng(11);
  const std::int32_t dim = 32, heads = 3;
  const std::vector<std::int32_t> pos = {0, 3, 511, 40000};
  const auto tokens = static_cast<std::int64_t>(pos.size());
  std::vector<float> freq(dim / 2);
  for (std::size_t i = 0; i < freq.size(); ++i) freq[i] = 1.0f / static_cast<float>(1 + 7 * i * i);
  const float scale = 1.1386294f;
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(tokens * heads * dim));
  std::vector<float> y = x;
  const kernels::Rope rope(dim, freq, scale);
  EXPECT_EQ(rope.attention_scaling(), scale);
  rope.apply(y.data(), tokens, heads, pos.data());
  std::vector<double> ref(x.size());
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int32_t i = 0; i < dim / 2; ++i) {
      const float angle = static_cast<float>(pos[static_cast<std::size_t>(t)]) * freq[static_cast<std::size_t>(i)];
      const double c = std::cos(static_cast<double>(angle)) * scale, s = std::sin(static_cast<double>(angle)) * scale;
      for (std::int32_t h = 0; h < heads; ++h) {
        const auto base = static_cast<std::size_t>((t * heads + h) * dim);
        const double a = x[base + static_cast<std::size_t>(i)], b = x[base + static_cast<std::size_t>(i + dim / 2)];
        ref[base + static_cast<std::size_t>(i)] = a * c - b * s;
        ref[base + static_cast<std::size_t>(i + dim / 2)] = b * c + a * s;
      }
    }
  EXPECT_LT(nmse(y, ref), 1e-12);
  // Position 0 is no longer the identity: the factor scales q and k.
  EXPECT_NEAR(y[0], x[0] * scale, 1e-6);
}

TEST(Rope, PositionZeroIsIdentity) {
  Rng rng(5);
  const std::vector<float> x = rng.uniform_vector(2 * 64);
  std::vector<float> y = x;
  const std::int32_t pos = 0;
  kernels::Rope(64, 10000.0).apply(y.data(), 1, 2, &pos);
  EXPECT_EQ(y, x);
}

TEST(Rope, InverseFrequenciesFollowTheta) {
  kernels::Rope rope(8, 10000.0);
  ASSERT_EQ(rope.inv_freq().size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(rope.inv_freq()[static_cast<std::size_t>(i)], std::pow(10000.0, -2.0 * i / 8), 1e-7);
}

// Far along a sequence the float32 angle differs from the exact one by ~pos·2⁻²⁴ radians;
// transformers uses the float32 angle, so must we. A kernel computing the angle in double
// passes the test above but fails this one.
TEST(Rope, UsesFloat32AngleAtLargePositions) {
  Rng rng(6);
  const std::int32_t dim = 64, heads = 1;
  const std::vector<std::int32_t> pos = {100003, 262143};
  const std::vector<float> x = rng.uniform_vector(pos.size() * dim);
  std::vector<float> y = x;
  kernels::Rope(dim, 10000.0).apply(y.data(), 2, heads, pos.data());
  const std::vector<double> as_torch = ref_rope(x, 2, heads, dim, 10000.0, pos, true);
  const std::vector<double> exact = ref_rope(x, 2, heads, dim, 10000.0, pos, false);
  ASSERT_GT(nmse(y, exact), 1e-9) << "test is meaningless if both angles agree";
  EXPECT_LT(nmse(y, as_torch), 1e-12);
}

}  // namespace
}  // namespace sy::test
