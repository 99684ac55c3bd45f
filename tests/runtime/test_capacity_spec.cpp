// CapacitySpec: its check names the field and value.
#include <gtest/gtest.h>

#include "engine/runtime/capacity_spec.h"

namespace sy {
namespace {

TEST(CapacitySpecTest, EveryLimitIsAtLeastOne) {
  EXPECT_TRUE(validate_capacity(CapacitySpec{}).ok());
  EXPECT_TRUE(validate_capacity({1, 1, 1}).ok());
  EXPECT_EQ(validate_capacity({0, 16, 64}).message(), "kv_pages_per_rank must be >= 1, got 0");
  EXPECT_EQ(validate_capacity({4096, -3, 64}).message(), "page_size must be >= 1, got -3");
  EXPECT_EQ(validate_capacity({4096, 16, 0}).message(), "max_batch must be >= 1, got 0");
}

}  // namespace
}  // namespace sy
