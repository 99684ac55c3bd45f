// Conversions between float32 and the 16-bit weight types.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "tests/kernels/reference.h"

namespace sy::test {
namespace {

using kernels::bf16_to_f32;
using kernels::f16_to_f32;
using kernels::f32_to_bf16;
using kernels::f32_to_f16;

float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }
std::uint32_t to_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

TEST(Dtype, NamesAndSizes) {
  EXPECT_EQ(kernels::dtype_name(DType::F32), "f32");
  EXPECT_EQ(kernels::dtype_name(DType::F16), "f16");
  EXPECT_EQ(kernels::dtype_name(DType::BF16), "bf16");
  EXPECT_EQ(kernels::dtype_size(DType::F32), 4u);
  EXPECT_EQ(kernels::dtype_size(DType::BF16), 2u);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000u)), 0x3f80);  // tie, lower neighbour even: down
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000u)), 0x3f82);  // tie, lower neighbour odd: up
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);  // just above the tie: up
  EXPECT_EQ(f32_to_bf16(from_bits(0x3f807fffu)), 0x3f80);  // just below the tie: down
  EXPECT_EQ(f32_to_bf16(from_bits(0xbf818000u)), 0xbf82);  // sign does not change the rule
  EXPECT_EQ(f32_to_bf16(from_bits(0x3fff8000u)), 0x4000);  // carry into the exponent
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf, like torch
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00010000u)), 0x0001);  // subnormals are just truncated bits
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  // A NaN whose payload sits only in the dropped bits must not turn into infinity.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(from_bits(0x7f800001u)))));
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
}

// IEEE binary16 value from its bits, computed from the definition in double.
double f16_definition(std::uint16_t h) {
  const double sign = (h >> 15) != 0 ? -1.0 : 1.0;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 0x1f) return m == 0 ? sign * INFINITY : NAN;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

TEST(F16, ToF32IsExactForAllHalfValues) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const double expected = f16_definition(static_cast<std::uint16_t>(h));
    const float got = f16_to_f32(static_cast<std::uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), expected) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;  // -0 stays -0
    }
  }
}

// Nearest binary16 by search over all finite halves, ties to the even encoding; beyond the
// largest finite half by half an ulp or more, infinity. Independent of the bit tricks.
std::uint16_t f16_nearest(float f) {
  if (std::isnan(f)) return 0x7e00;
  const double x = std::fabs(static_cast<double>(f));
  const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (x >= 65520.0) return static_cast<std::uint16_t>(sign | 0x7c00);
  std::uint16_t lo = 0, hi = 0x7bff;  // positive finite halves are ordered like their encodings
  while (lo < hi) {
    const auto mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
    if (f16_definition(mid) <= x) lo = mid; else hi = static_cast<std::uint16_t>(mid - 1);
  }
  std::uint16_t best = lo;
  if (lo < 0x7bff) {
    const double below = x - f16_definition(lo);
    const double above = f16_definition(static_cast<std::uint16_t>(lo + 1)) - x;
    if (above < below || (above == below && (lo & 1) != 0)) best = static_cast<std::uint16_t>(lo + 1);
  }
  return static_cast<std::uint16_t>(sign | best);
}

TEST(F16, FromF32RoundsToNearestEvenEverywhere) {
  Rng rng(11);
  std::vector<float> values;
  // Random magnitudes over the whole half range, subnormals and overflow included.
  for (int i = 0; i < 20000; ++i) values.push_back(std::ldexp(rng.uniform(-1.0f, 1.0f), rng.integer(-27, 17)));
  // Exact ties and their neighbours around every binade edge of the subnormal range.
  for (int e = -26; e <= -13; ++e)
    for (const double k : {0.5, 1.0, 1.5, 2.5, 3.5}) {
      const auto v = static_cast<float>(std::ldexp(k, e));
      values.insert(values.end(), {v, -v, std::nextafter(v, 0.0f), std::nextafter(v, 1.0f)});
    }
  for (const float v : values) ASSERT_EQ(f32_to_f16(v), f16_nearest(v)) << v;
}

TEST(F16, SpecialValues) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // the tie goes to even, which is infinity
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);   // smallest subnormal
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);   // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(f32_to_f16(0x1.8p-25f), 0x0001);
  EXPECT_EQ(f32_to_f16(0x1.8p-24f), 0x0002);  // 1.5 units: tie, goes to 2
  EXPECT_EQ(f32_to_f16(0x1.ff8p-15f), 0x03ff);  // largest subnormal
  EXPECT_EQ(f32_to_f16(0x1.ffcp-15f), 0x0400);  // + half an ulp: tie, to the even smallest normal
  EXPECT_EQ(f32_to_f16(0x1p-14f), 0x0400);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  const std::uint16_t nan = f32_to_f16(NAN);
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(from_bits(0x7f800001u)))));  // payload below the kept bits
  EXPECT_EQ(f16_to_f32(0x7c00), INFINITY);
  EXPECT_EQ(f16_to_f32(0xfc00), -INFINITY);
}

TEST(F16, RoundTripsEveryFiniteHalf) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue;  // NaN payloads may change
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<std::uint16_t>(h))), h) << std::hex << h;
  }
}

// The bulk conversions (vectorised) must agree bit for bit with the scalar definitions.
class BulkConversion : public ::testing::TestWithParam<std::size_t> {};

TEST_P(BulkConversion, MatchesScalarBitForBit) {
  const std::size_t n = GetParam();
  Rng rng(n + 1);
  std::vector<float> src(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = std::ldexp(rng.uniform(-1.0f, 1.0f), rng.integer(-30, 20));
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 65520.0f, 0x1p-25f, from_bits(0x3f808000u)};
  for (std::size_t i = 0; i < std::min<std::size_t>(n, 8); ++i) src[i * 3 % n] = specials[i];

  for_each_path([&](const std::string& path) {
    SCOPED_TRACE(path);
    for (const DType t : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(dtype_label(t));
      std::vector<std::uint16_t> packed(n + 1, 0xabcd);
      kernels::convert_from_f32(src.data(), packed.data(), t, n);
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t expected = t == DType::BF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
        if (std::isnan(src[i])) {
          const float back = t == DType::BF16 ? bf16_to_f32(packed[i]) : f16_to_f32(packed[i]);
          ASSERT_TRUE(std::isnan(back)) << i;
        } else {
          ASSERT_EQ(packed[i], expected) << "element " << i << " of " << n;
        }
      }
      EXPECT_EQ(packed[n], 0xabcd) << "wrote past the end";

      std::vector<float> widened(n + 1, 42.0f);
      kernels::convert_to_f32(packed.data(), t, widened.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        const float expected = t == DType::BF16 ? bf16_to_f32(packed[i]) : f16_to_f32(packed[i]);
        if (std::isnan(expected)) {
          ASSERT_TRUE(std::isnan(widened[i]));
        } else {
          ASSERT_EQ(to_bits(widened[i]), to_bits(expected)) << "element " << i << " of " << n;
        }
      }
      EXPECT_EQ(widened[n], 42.0f) << "wrote past the end";
    }
    std::vector<float> copy(n);
    kernels::convert_to_f32(src.data(), DType::F32, copy.data(), n);
    EXPECT_EQ(std::memcmp(copy.data(), src.data(), n * sizeof(float)), 0);
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, BulkConversion, ::testing::Values(1, 7, 8, 15, 16, 17, 33, 1000));

}  // namespace
}  // namespace sy::test
