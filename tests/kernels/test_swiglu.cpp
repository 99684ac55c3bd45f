// silu_mul and the SwiGLU expert MLP (row scaling and accumulation as the MoE layer uses them).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/swiglu.h"
#include "tests/kernels/reference.h"

namespace sy::test {
namespace {

class SiluMulTest : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(SiluMulTest, MatchesDefinition) {
  const std::int64_t n = GetParam();
  Rng rng(static_cast<std::uint64_t>(n));
  std::vector<float> g = rng.uniform_vector(static_cast<std::size_t>(n), -12.0f, 12.0f);
  const std::vector<float> u = rng.uniform_vector(static_cast<std::size_t>(n), -3.0f, 3.0f);
  // Saturated ends of the sigmoid and exact zero.
  const float extremes[] = {0.0f, -100.0f, 100.0f, -87.5f, 88.5f, 1e-20f, -30.0f};
  for (std::size_t i = 0; i < std::size(extremes) && i < g.size(); ++i) g[i * 5 % g.size()] = extremes[i];
  for_each_path([&](const std::string& path) {
    SCOPED_TRACE(path);
    std::vector<float> h(g.size(), NAN);
    kernels::silu_mul(g.data(), u.data(), h.data(), n);
    for (std::size_t i = 0; i < g.size(); ++i) {
      const double ref = ref_silu(g[i]) * u[i];
      ASSERT_TRUE(std::isfinite(h[i])) << "g=" << g[i];
      // A few float32 ulps of the result (the vector exp is within ~2 ulp).
      ASSERT_NEAR(h[i], ref, 4e-7 * std::fabs(ref) + 1e-30) << "g=" << g[i] << " u=" << u[i];
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, SiluMulTest, ::testing::Values(1, 7, 8, 9, 1000, 70001));

struct FfnCase {
  DType dtype;
  std::int64_t M, H, I;
};

class SwigluFfnTest : public ::testing::TestWithParam<FfnCase> {};

TEST_P(SwigluFfnTest, MatchesReferenceInEveryMode) {
  const auto [dtype, M, H, I] = GetParam();
  Rng rng(static_cast<std::uint64_t>(M * 97 + H * 13 + I));
  const TestWeight gate = make_weight(rng, dtype, I, H, 0.5f);
  const TestWeight up = make_weight(rng, dtype, I, H, 0.5f);
  const TestWeight down = make_weight(rng, dtype, H, I, 0.5f);
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(M * H), -2.0f, 2.0f);
  const std::vector<float> scale = rng.uniform_vector(static_cast<std::size_t>(M), 0.0f, 1.0f);
  const std::vector<float> y0 = rng.uniform_vector(static_cast<std::size_t>(M * H));

  // Reference: h = silu(x·gateᵀ) ⊙ (x·upᵀ), out = (h·downᵀ) · scale[m] (+ y0).
  const std::vector<double> g = ref_linear(x, M, gate, nullptr, nullptr);
  const std::vector<double> u = ref_linear(x, M, up, nullptr, nullptr);
  std::vector<float> h(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) h[i] = static_cast<float>(ref_silu(g[i]) * u[i]);
  const std::vector<double> out = ref_linear(h, M, down, nullptr, nullptr);

  kernels::SwigluScratch scratch;
  for_each_path([&](const std::string& path) {
    for (const bool scaled : {false, true})
      for (const bool accumulate : {false, true}) {
        SCOPED_TRACE(path + (scaled ? ", row_scale" : "") + (accumulate ? ", accumulate" : ""));
        std::vector<double> ref(out.size());
        for (std::int64_t m = 0; m < M; ++m)
          for (std::int64_t i = 0; i < H; ++i) {
            const auto k = static_cast<std::size_t>(m * H + i);
            ref[k] = out[k] * (scaled ? scale[static_cast<std::size_t>(m)] : 1.0) + (accumulate ? y0[k] : 0.0);
          }
        std::vector<float> y = accumulate ? y0 : std::vector<float>(y0.size(), NAN);
        kernels::swiglu_ffn(x.data(), M, gate.view(), up.view(), down.view(), y.data(), scratch,
                            scaled ? scale.data() : nullptr, accumulate);
        // The reference rounds h to float32 too, but from double g and u: a few ulp apart.
        EXPECT_LT(nmse(y, ref), 1e-11);
      }
  });
}

// Under GemmInputs::WeightType both GEMM inputs, x and h, are rounded to the weights' type (as
// swiglu_experts_cuda rounds them); f32 weights compute exactly as under Float32.
TEST_P(SwigluFfnTest, WeightTypeInputsRoundXAndH) {
  const auto [dtype, M, H, I] = GetParam();
  Rng rng(static_cast<std::uint64_t>(M * 31 + H * 7 + I));
  const TestWeight gate = make_weight(rng, dtype, I, H, 0.5f);
  const TestWeight up = make_weight(rng, dtype, I, H, 0.5f);
  const TestWeight down = make_weight(rng, dtype, H, I, 0.5f);
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(M * H), -2.0f, 2.0f);
  const std::vector<float> scale = rng.uniform_vector(static_cast<std::size_t>(M), 0.0f, 1.0f);
  auto round = [&](std::vector<float> v) {
    if (dtype == DType::F32) return v;
    for (float& f : v)
      f = dtype == DType::BF16 ? kernels::bf16_to_f32(kernels::f32_to_bf16(f)) : kernels::f16_to_f32(kernels::f32_to_f16(f));
    return v;
  };
  const std::vector<float> xr = round(x);
  const std::vector<double> g = ref_linear(xr, M, gate, nullptr, nullptr);
  const std::vector<double> u = ref_linear(xr, M, up, nullptr, nullptr);
  std::vector<float> h(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) h[i] = static_cast<float>(ref_silu(g[i]) * u[i]);
  std::vector<double> ref = ref_linear(round(h), M, down, nullptr, nullptr);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t i = 0; i < H; ++i) ref[static_cast<std::size_t>(m * H + i)] *= scale[static_cast<std::size_t>(m)];

  kernels::SwigluScratch scratch;
  std::vector<float> y(static_cast<std::size_t>(M * H), NAN), plain(y.size(), NAN);
  kernels::swiglu_ffn(x.data(), M, gate.view(), up.view(), down.view(), y.data(), scratch, scale.data(), false,
                      kernels::GemmInputs::WeightType);
  kernels::swiglu_ffn(x.data(), M, gate.view(), up.view(), down.view(), plain.data(), scratch, scale.data(), false,
                      kernels::GemmInputs::Float32);
  // h rounded from float g and u here and from double ones in the reference: an h near a
  // rounding boundary may land one 16-bit ulp apart, so a looser bound than unrounded inputs.
  EXPECT_LT(nmse(y, ref), dtype == DType::F32 ? 1e-11 : 1e-8);
  if (dtype == DType::F32) {
    EXPECT_EQ(y, plain);
  } else {
    EXPECT_GT(nmse(y, std::vector<double>(plain.begin(), plain.end())), 1e-8) << "the rounding must move the result";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwigluFfnTest,
                         ::testing::Values(FfnCase{DType::F32, 1, 24, 40}, FfnCase{DType::BF16, 3, 40, 24},
                                           FfnCase{DType::F16, 17, 33, 20}, FfnCase{DType::BF16, 64, 64, 96},
                                           FfnCase{DType::F32, 9, 16, 56}));

TEST(SwigluScratch, GrowsOnceThenReusesAndMoves) {
  kernels::SwigluScratch a;
  a.reserve(100);
  ASSERT_GE(a.capacity, 100);
  float* gate = a.gate;
  a.reserve(50);
  EXPECT_EQ(a.gate, gate) << "a smaller request must not reallocate";
  kernels::SwigluScratch b(std::move(a));
  EXPECT_EQ(b.gate, gate);
  EXPECT_EQ(a.gate, nullptr);  // NOLINT(bugprone-use-after-move): moved-from state is specified
  EXPECT_EQ(a.capacity, 0);
  a = std::move(b);
  EXPECT_EQ(a.gate, gate);
}

}  // namespace
}  // namespace sy::test
