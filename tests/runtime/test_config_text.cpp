// The wording helpers of setting refusals: value lists, typo suggestions, doubles written back.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "engine/runtime/config_text.h"

namespace sy {
namespace {

TEST(ConfigText, OneOfListsWithCommasAndOr) {
  EXPECT_EQ(one_of({}), "");
  EXPECT_EQ(one_of({"a"}), "a");
  EXPECT_EQ(one_of({"a", "b"}), "a or b");
  EXPECT_EQ(one_of({"a", "b", "c"}), "a, b or c");
}

TEST(ConfigText, DidYouMeanOnlyForCloseKeys) {
  EXPECT_EQ(did_you_mean("schedular", {"name", "scheduler"}), "; did you mean 'scheduler'?");
  EXPECT_EQ(did_you_mean("blok", {"block", "blocks"}), "; did you mean 'block'?");
  EXPECT_EQ(did_you_mean("colour", {"name", "device"}), "");
}

TEST(ConfigText, FormatDoubleReadsBackAsTheSameFloat) {
  EXPECT_EQ(format_double(1.0), "1.0");
  EXPECT_EQ(format_double(-0.5), "-0.5");
  EXPECT_EQ(format_double(0.1), "0.1");
  EXPECT_EQ(format_double(1e300), "1e+300");
  EXPECT_EQ(format_double(std::numeric_limits<double>::quiet_NaN()), "nan");
  for (double v : {0.1, 1.0 / 3.0, 123456.789, 2.5e-10}) EXPECT_EQ(std::stod(format_double(v)), v) << v;
}

}  // namespace
}  // namespace sy
