// Layout: the constructors for tests and benchmarks, validate_layout on edited layouts, and the
// to_toml round trip of irregular placements, names and policies.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/runtime/layout.h"
#include "tests/runtime/layout_round_trip.h"
#include "tests/runtime/test_configs.h"

namespace sy {
namespace {

using testing::mixtral_like;
using testing::qwen3_like;
using testing::expect_round_trip;

TEST(LayoutConstructors, ColocatedAndDisaggregated) {
  for (const ModelConfig& config : {mixtral_like(), qwen3_like()}) {
    Layout col = make_colocated_layout(3, config);
    ASSERT_TRUE(validate_layout(col, config).ok()) << validate_layout(col, config).message();
    EXPECT_EQ(col.num_attention_ranks(), 3);
    EXPECT_EQ(col.policy.policy, "sync");
    EXPECT_EQ(col.devices[2].name, "gpu2");
    EXPECT_EQ(col.placement.devices(config.num_layers - 1, 5), (std::vector<std::int32_t>{2}));  // 5 mod 3
    expect_round_trip(col, config);

    Layout dis = make_disaggregated_layout(2, 3, config);
    ASSERT_TRUE(validate_layout(dis, config).ok()) << validate_layout(dis, config).message();
    EXPECT_EQ(dis.num_devices(), 5);
    EXPECT_EQ(dis.attention_devices(), (std::vector<std::int32_t>{0, 1}));
    EXPECT_FALSE(dis.devices[1].holds_experts);
    EXPECT_TRUE(dis.devices[4].holds_experts);
    EXPECT_EQ(dis.placement.devices(config.num_layers - 1, 7), (std::vector<std::int32_t>{3}));  // 2 + 7 mod 3
    EXPECT_EQ(dis.policy.policy, "async");
    expect_round_trip(dis, config);
  }
}

TEST(LayoutConstructors, ValidateLayoutCatchesInconsistentEdits) {
  const ModelConfig c = mixtral_like();
  Layout l = make_disaggregated_layout(1, 2, c);
  Layout bad = l;
  bad.devices[2].name = "gpu1";
  EXPECT_EQ(validate_layout(bad, c).message(), "duplicate device name 'gpu1'");
  bad = l;
  bad.devices[1].attention = true;  // rank not renumbered
  EXPECT_EQ(validate_layout(bad, c).message(), "device 'gpu1' has attention rank -1, expected 1 (ranks follow device order)");
  bad = l;
  bad.devices[0].holds_experts = true;
  EXPECT_EQ(validate_layout(bad, c).message(), "device 'gpu0': holds_experts disagrees with the placement");
  bad = l;
  bad.policy.microbatches = 0;
  EXPECT_EQ(validate_layout(bad, c).message(), "policy: microbatches must be in [1, 64], got 0");
  bad = l;
  bad.capacity.max_batch = 0;
  EXPECT_EQ(validate_layout(bad, c).message(), "capacity: max_batch must be >= 1, got 0");
  EXPECT_NE(validate_layout(l, qwen3_like()).message().find("placement covers 4 blocks x 8 experts"), std::string::npos);
}

TEST(LayoutConstructors, RoundTripKeepsIrregularPlacementsNamesAndPolicy) {
  const ModelConfig q = qwen3_like();
  Layout l = make_disaggregated_layout(2, 2, q);
  l.name = "odd \"name\" with \\ and\ttab";
  l.devices[0].name = "node-1/gpu:0";
  ASSERT_TRUE(l.placement.set(3, 9, {0, 3}).ok());
  ASSERT_TRUE(l.placement.add(5, 0, 3).ok());
  l.devices[0].holds_experts = true;
  l.policy = {"pingpong", "flfs", 7, 0.1, 5};
  l.capacity = {123, 8, 9};
  ASSERT_TRUE(validate_layout(l, q).ok()) << validate_layout(l, q).message();
  expect_round_trip(l, q);
  const std::string text = l.to_toml();
  EXPECT_NE(text.find("[[override]]\nblock = 3\nexpert = 9\ndevices = [\"node-1/gpu:0\", \"gpu3\"]"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace sy
