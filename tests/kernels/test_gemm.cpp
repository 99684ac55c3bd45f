// linear (every weight dtype, small-M fused and large-M panel paths) and the sgemm wrapper.
#include <gtest/gtest.h>

#include <bit>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/gemm.h"
#include "tests/kernels/reference.h"

namespace sy::test {
namespace {

// float32 accumulation over K ≤ 1024 terms stays far below this; one wrong element does not.
constexpr double kTolerance = 1e-10;

struct LinearCase {
  std::int64_t M, N, K;
};

class LinearTest : public ::testing::TestWithParam<std::tuple<DType, LinearCase>> {};

TEST_P(LinearTest, MatchesReferenceWithAndWithoutBiasAndAccumulate) {
  const auto [dtype, shape] = GetParam();
  const auto [M, N, K] = shape;
  Rng rng(static_cast<std::uint64_t>(M * 1000003 + N * 1009 + K));
  const TestWeight w = make_weight(rng, dtype, N, K);
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(M * K));
  const std::vector<float> bias = rng.uniform_vector(static_cast<std::size_t>(N));
  const std::vector<float> y0 = rng.uniform_vector(static_cast<std::size_t>(M * N));

  for_each_path([&](const std::string& path) {
    for (const bool with_bias : {false, true})
      for (const bool accumulate : {false, true}) {
        SCOPED_TRACE(path + (with_bias ? ", bias" : ", no bias") + (accumulate ? ", accumulate" : ", overwrite"));
        std::vector<float> y = accumulate ? y0 : std::vector<float>(y0.size(), 1e30f);  // garbage must be overwritten
        kernels::linear(x.data(), M, w.view(), with_bias ? bias.data() : nullptr, y.data(), accumulate);
        const std::vector<double> ref = ref_linear(x, M, w, with_bias ? bias.data() : nullptr, accumulate ? &y0 : nullptr);
        EXPECT_LT(nmse(y, ref), kTolerance);
      }
  });
}

// M spans the fused kernel (≤ 8) and the panel path; N and K include 1, odd sizes and K not a
// multiple of 8; N = 1100 with K = 1024 crosses panel boundaries (512 rows per panel).
const LinearCase kShapes[] = {
    {1, 1, 1},    {1, 5, 7},     {1, 33, 64},   {1, 300, 67},  {2, 9, 16},   {3, 17, 31},
    {3, 1, 129},  {8, 13, 40},   {9, 13, 40},   {17, 31, 100}, {64, 70, 33}, {64, 1, 64},
    {9, 1100, 1024}, {1, 1100, 1024},
};

std::string linear_case_name(const ::testing::TestParamInfo<std::tuple<DType, LinearCase>>& p) {
  const LinearCase& s = std::get<1>(p.param);
  std::string name = dtype_label(std::get<0>(p.param));
  for (const auto& [tag, value] : {std::pair{"_M", s.M}, std::pair{"_N", s.N}, std::pair{"_K", s.K}}) {
    name += tag;
    name += std::to_string(value);
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, LinearTest,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kShapes)),
                         linear_case_name);

TEST(Linear, ZeroRowsLeavesOutputAlone) {
  Rng rng(1);
  const TestWeight w = make_weight(rng, DType::BF16, 4, 8);
  std::vector<float> y(4, 7.0f);
  kernels::linear(nullptr, 0, w.view(), nullptr, y.data());
  EXPECT_EQ(y, std::vector<float>(4, 7.0f));
}

TEST(Linear, SameResultWithOneAndTwoThreads) {
  Rng rng(2);
  const TestWeight w = make_weight(rng, DType::BF16, 257, 96);
  const std::vector<float> x = rng.uniform_vector(4 * 96);
  const int before = kernels::num_threads();
  std::vector<float> y1(4 * 257), y2(4 * 257);
  kernels::set_num_threads(1);
  EXPECT_EQ(kernels::num_threads(), 1);
  kernels::linear(x.data(), 4, w.view(), nullptr, y1.data());
  kernels::set_num_threads(2);
  EXPECT_EQ(kernels::num_threads(), 2);
  kernels::linear(x.data(), 4, w.view(), nullptr, y2.data());
  kernels::set_num_threads(before);
  // Each output is one thread's dot product whatever the split: bitwise equal.
  EXPECT_EQ(y1, y2);
}

// GemmInputs::WeightType rounds to nearest even as the cuda kernels do (a tie to bf16 and to
// f16 included); Float32 inputs, and f32 weights under either mode, are x itself, uncopied.
TEST(GemmInput, RoundsToTheWeightTypeOnlyWhenAsked) {
  const std::vector<float> x = {1.0f, std::bit_cast<float>(0x3f808000u), std::bit_cast<float>(0x3f818000u),
                                std::bit_cast<float>(0x3f801000u), -3.14159f, 65504.0f, 1e-30f, 0.0f};
  std::vector<float> scratch;
  const auto n = static_cast<std::int64_t>(x.size());
  EXPECT_EQ(kernels::gemm_input(x.data(), n, DType::BF16, kernels::GemmInputs::Float32, scratch), x.data());
  EXPECT_EQ(kernels::gemm_input(x.data(), n, DType::F32, kernels::GemmInputs::WeightType, scratch), x.data());
  EXPECT_TRUE(scratch.empty());
  const float* b = kernels::gemm_input(x.data(), n, DType::BF16, kernels::GemmInputs::WeightType, scratch);
  ASSERT_NE(b, x.data());
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(b[1]), 0x3f800000u) << "a tie rounds to the even neighbour, down";
  EXPECT_EQ(std::bit_cast<std::uint32_t>(b[2]), 0x3f820000u) << "a tie rounds to the even neighbour, up";
  EXPECT_EQ(b[4], kernels::bf16_to_f32(kernels::f32_to_bf16(-3.14159f)));
  EXPECT_NE(b[4], -3.14159f);
  const std::vector<float> bf16(b, b + n);
  const float* h = kernels::gemm_input(x.data(), n, DType::F16, kernels::GemmInputs::WeightType, scratch);
  EXPECT_EQ(h[3], 1.0f) << "2^-8 above 1 is half an f16 ulp: a tie, rounded to even";
  EXPECT_EQ(h[4], kernels::f16_to_f32(kernels::f32_to_f16(-3.14159f)));
  EXPECT_EQ(h[5], 65504.0f);
  EXPECT_EQ(h[6], 0.0f) << "below f16's smallest subnormal";
  EXPECT_NE(bf16[6], 0.0f) << "bf16 keeps float32's range";
}

TEST(Sgemm, BothLayoutsWithStridesAlphaBeta) {
  Rng rng(3);
  const std::int64_t M = 5, N = 7, K = 9, lda = 11, ldb_t = 12, ldb_n = 10, ldc = 8;
  const std::vector<float> A = rng.uniform_vector(M * lda);
  const std::vector<float> Bt = rng.uniform_vector(N * ldb_t);  // [N, K] with stride ldb_t
  const std::vector<float> Bn = rng.uniform_vector(K * ldb_n);  // [K, N] with stride ldb_n
  const std::vector<float> C0 = rng.uniform_vector(M * ldc);
  const float alpha = 0.75f, beta = -0.5f;
  for (const bool transposed : {false, true}) {
    SCOPED_TRACE(transposed ? "B transposed" : "B plain");
    std::vector<float> C = C0;
    kernels::sgemm(transposed, M, N, K, alpha, A.data(), lda, transposed ? Bt.data() : Bn.data(),
                   transposed ? ldb_t : ldb_n, beta, C.data(), ldc);
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < ldc; ++n) {
        const auto i = static_cast<std::size_t>(m * ldc + n);
        if (n >= N) {
          EXPECT_EQ(C[i], C0[i]) << "padding column touched";
          continue;
        }
        double acc = 0.0;
        for (std::int64_t k = 0; k < K; ++k) {
          const double b = transposed ? Bt[static_cast<std::size_t>(n * ldb_t + k)] : Bn[static_cast<std::size_t>(k * ldb_n + n)];
          acc += static_cast<double>(A[static_cast<std::size_t>(m * lda + k)]) * b;
        }
        EXPECT_NEAR(C[i], alpha * acc + beta * C0[i], 1e-5) << m << "," << n;
      }
  }
}

}  // namespace
}  // namespace sy::test
