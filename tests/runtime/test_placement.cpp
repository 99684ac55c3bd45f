// Placement: sorted duplicate-free device lists per (block, expert), the refusals of set(), and
// the check against a deployment's devices.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/runtime/placement.h"
#include "tests/runtime/test_configs.h"

namespace sy {
namespace {

using testing::mixtral_like;
using testing::qwen3_like;

TEST(PlacementTest, SetKeepsSortedUniqueListsAndRefusesBadSlots) {
  Placement p(qwen3_like());
  EXPECT_EQ(p.num_blocks(), 6);
  EXPECT_EQ(p.num_experts(), 16);
  EXPECT_TRUE(p.devices(0, 3).empty());  // dense
  ASSERT_TRUE(p.set(1, 3, {4, 0, 2}).ok());
  EXPECT_EQ(p.devices(1, 3), (std::vector<std::int32_t>{0, 2, 4}));
  EXPECT_TRUE(p.holds(1, 3, 2));
  EXPECT_FALSE(p.holds(1, 3, 1));
  ASSERT_TRUE(p.add(3, 15, 2).ok());
  EXPECT_EQ(p.experts_on(2), (std::vector<BlockExpert>{{1, 3}, {3, 15}}));

  EXPECT_EQ(p.set(0, 1, {0}).message(), "block 0 is dense (it has no experts)");
  EXPECT_EQ(p.set(6, 1, {0}).message(), "block 6 is out of range (the model has 6 blocks)");
  EXPECT_EQ(p.set(1, 16, {0}).message(), "expert 16 is out of range (the model has 16 experts)");
  EXPECT_EQ(p.set(1, 1, {0, -1}).message(), "block 1 expert 1: negative device index -1");
  EXPECT_EQ(p.set(1, 1, {2, 0, 2}).message(), "block 1 expert 1: device 2 listed twice");
  EXPECT_EQ(p.add(1, 3, 4).message(), "block 1 expert 3: device 4 listed twice");
}

TEST(PlacementTest, ValidateFindsHolesAndDevicesOutOfRange) {
  const ModelConfig c = mixtral_like();
  Placement p(c);
  for (std::int32_t b = 0; b < 4; ++b)
    for (std::int32_t e = 0; e < 8; ++e) ASSERT_TRUE(p.set(b, e, {e % 2}).ok());
  EXPECT_TRUE(p.validate(2).ok());
  EXPECT_EQ(p.validate(1).message(), "block 0 expert 1 is placed on device 1, but there are 1 devices");
  ASSERT_TRUE(p.set(2, 6, {}).ok());
  EXPECT_EQ(p.validate(2).message(), "block 2 expert 6 is placed on no device");
}

}  // namespace
}  // namespace sy
