// RMSNorm against its Hugging Face definition.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/rmsnorm.h"
#include "tests/kernels/reference.h"

namespace sy::test {
namespace {

std::vector<double> ref_rmsnorm(const std::vector<float>& x, const std::vector<float>& w, float eps,
                                std::int64_t rows, std::int64_t dim) {
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0.0;
    for (std::int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[static_cast<std::size_t>(r * dim + i)]) * x[static_cast<std::size_t>(r * dim + i)];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    for (std::int64_t i = 0; i < dim; ++i) {
      const auto k = static_cast<std::size_t>(r * dim + i);
      y[k] = w[static_cast<std::size_t>(i)] * (x[k] * inv);
    }
  }
  return y;
}

class RmsNormTest : public ::testing::TestWithParam<std::tuple<DType, std::int64_t, std::int64_t>> {};

TEST_P(RmsNormTest, MatchesReferenceOutOfPlaceAndInPlace) {
  const auto [dtype, rows, dim] = GetParam();
  Rng rng(static_cast<std::uint64_t>(rows * 7919 + dim));
  const TestWeight w = make_weight(rng, dtype, 1, dim, 2.0f);
  std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(rows * dim), -3.0f, 3.0f);
  const float eps = 1e-6f;
  const std::vector<double> ref = ref_rmsnorm(x, w.values, eps, rows, dim);
  for_each_path([&](const std::string& path) {
    SCOPED_TRACE(path);
    std::vector<float> y(x.size(), NAN);
    kernels::rmsnorm(x.data(), w.bytes.data(), dtype, eps, rows, dim, y.data());
    EXPECT_LT(nmse(y, ref), 1e-12);
    std::vector<float> in_place = x;
    kernels::rmsnorm(in_place.data(), w.bytes.data(), dtype, eps, rows, dim, in_place.data());
    EXPECT_EQ(in_place, y);
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormTest,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::Values(1, 5, 300), ::testing::Values(1, 7, 64, 1000)));

TEST(RmsNorm, EpsilonMattersAndZeroRowsStayFinite) {
  const std::vector<float> w(4, 1.0f);
  const std::vector<float> zeros(4, 0.0f);
  std::vector<float> y(4, NAN);
  kernels::rmsnorm(zeros.data(), w.data(), DType::F32, 1e-6f, 1, 4, y.data());
  EXPECT_EQ(y, zeros);
  // x = 1e-3 everywhere: mean(x²) = 1e-6, so with eps = 1e-6 the scale is 1/sqrt(2e-6).
  const std::vector<float> small(4, 1e-3f);
  kernels::rmsnorm(small.data(), w.data(), DType::F32, 1e-6f, 1, 4, y.data());
  EXPECT_NEAR(y[0], 1e-3 / std::sqrt(2e-6), 1e-6);
}

}  // namespace
}  // namespace sy::test
