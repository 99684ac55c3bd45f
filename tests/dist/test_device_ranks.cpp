// Which rank runs each device: the layout's `rank` keys or an even split, and the layouts a
// multi-process run refuses.
#include <gtest/gtest.h>

#include "engine/dist/device_ranks.h"
#include "engine/runtime/layout_parser.h"
#include "tests/runtime/test_configs.h"

namespace sy::dist {
namespace {

using sy::testing::mixtral_like;

const char* kRanked = R"(
name = "ranked"
[[device]]
name = "a0"
attention = true
rank = 0
[[device]]
name = "e0"
experts = "auto"
rank = 2
[[device]]
name = "e1"
experts = "auto"
rank = 1
)";

TEST(DeviceRanks, TheRankKeyIsReadAndWrittenBack) {
  auto layout = parse_layout(kRanked, "ranked.toml", mixtral_like());
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  EXPECT_EQ(layout->devices[1].process, 2);
  auto again = parse_layout(layout->to_toml(), "again.toml", mixtral_like());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, *layout);
  auto ranks = assign_device_ranks(*layout, 3);
  ASSERT_TRUE(ranks.ok()) << ranks.status().message();
  EXPECT_EQ(*ranks, (std::vector<std::int32_t>{0, 2, 1}));
}

TEST(DeviceRanks, ANegativeRankIsRefusedByTheParser) {
  std::string text = kRanked;
  text.replace(text.find("rank = 2"), 8, "rank = -1");
  auto layout = parse_layout(text, "bad.toml", mixtral_like());
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.status().message().find("rank"), std::string::npos) << layout.status().message();
}

TEST(DeviceRanks, EvenSplitInFileOrder) {
  const Layout layout = make_disaggregated_layout(2, 4, mixtral_like());
  auto three = assign_device_ranks(layout, 3);
  ASSERT_TRUE(three.ok()) << three.status().message();
  EXPECT_EQ(*three, (std::vector<std::int32_t>{0, 0, 1, 1, 2, 2}));
  auto four = assign_device_ranks(layout, 4);
  ASSERT_TRUE(four.ok()) << four.status().message();
  EXPECT_EQ(*four, (std::vector<std::int32_t>{0, 0, 1, 2, 2, 3}));
  auto one = assign_device_ranks(layout, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<std::int32_t>(6, 0));
}

TEST(DeviceRanks, RefusalsNameTheDevice) {
  auto layout = parse_layout(kRanked, "ranked.toml", mixtral_like());
  ASSERT_TRUE(layout.ok());
  auto beyond = assign_device_ranks(*layout, 2);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("'e0' is on rank 2"), std::string::npos) << beyond.status().message();

  Layout partial = *layout;
  partial.devices[2].process = -1;
  auto some = assign_device_ranks(partial, 3);
  ASSERT_FALSE(some.ok());
  EXPECT_NE(some.status().message().find("'e1' has no rank"), std::string::npos) << some.status().message();

  auto crowded = assign_device_ranks(make_disaggregated_layout(2, 4, mixtral_like()), 7);
  ASSERT_FALSE(crowded.ok());
  EXPECT_NE(crowded.status().message().find("7 ranks"), std::string::npos) << crowded.status().message();
}

// Rank 0 keeps the coordinator; attention devices may run anywhere (their block tables are
// mirrored there), so neither the rank keys nor the even split are refused for them.
TEST(DeviceRanks, AttentionDevicesMayRunOnAnyRank) {
  auto layout = parse_layout(kRanked, "ranked.toml", mixtral_like());
  ASSERT_TRUE(layout.ok());
  Layout attention = *layout;
  attention.devices[0].process = 1;
  auto moved = assign_device_ranks(attention, 3);
  ASSERT_TRUE(moved.ok()) << moved.status().message();
  EXPECT_EQ((*moved)[0], 1);

  auto colocated = assign_device_ranks(make_colocated_layout(4, mixtral_like()), 2);
  ASSERT_TRUE(colocated.ok()) << colocated.status().message();
  EXPECT_EQ(*colocated, (std::vector<std::int32_t>{0, 0, 1, 1}));
}

}  // namespace
}  // namespace sy::dist
