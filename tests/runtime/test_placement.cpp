// Placement: sorted duplicate-free device lists per (block, expert), the refusals of set(), the
// JSON form control commands take and get_state reports, and the checks against a model's shape
// and a deployment's devices.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

TEST(PlacementTest, ExpertsByDeviceListsWhatExpertsOnListsForEachDevice) {
  // Random placements with replicas, holes and devices past the count asked for.
  std::mt19937 rng(17);
  for (int trial = 0; trial < 50; ++trial) {
    Placement p(qwen3_like());
    const std::int32_t devices = 1 + static_cast<std::int32_t>(rng() % 9);
    for (std::int32_t b = 0; b < p.num_blocks(); ++b) {
      if (!p.is_sparse(b)) continue;
      for (std::int32_t e = 0; e < p.num_experts(); ++e) {
        std::vector<std::int32_t> on;
        for (std::int32_t d = 0; d < devices + 2; ++d)
          if (rng() % 4 == 0) on.push_back(d);
        if (!on.empty()) {
          ASSERT_TRUE(p.set(b, e, on).ok());
        }
      }
    }
    const auto by_device = p.experts_by_device(devices);
    ASSERT_EQ(by_device.size(), static_cast<std::size_t>(devices));
    for (std::int32_t d = 0; d < devices; ++d) {
      EXPECT_EQ(by_device[static_cast<std::size_t>(d)], p.experts_on(d)) << d;
    }
  }
  EXPECT_TRUE(Placement(qwen3_like()).experts_by_device(0).empty());
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
// Every expert of every sparse block on device e mod 4, as control commands send it.
nlohmann::json round_robin_json(const ModelConfig& c) {
  nlohmann::json lists = nlohmann::json::array();
  for (std::int32_t b = 0; b < c.num_layers; ++b) {
    nlohmann::json experts = nlohmann::json::array();
    for (std::int32_t e = 0; c.is_sparse(b) && e < c.num_experts; ++e) experts.push_back(nlohmann::json::array({e % 4}));
    lists.push_back(experts);
  }
  return lists;
}

std::string from_json_error(const nlohmann::json& lists, const ModelConfig& c) {
  auto p = Placement::from_json(lists, c.num_experts, c.sparse_layers);
  return p.ok() ? "accepted" : p.status().message();
}

TEST(PlacementTest, JsonFormRoundTripsWithEmptyListsForDenseBlocks) {
  const ModelConfig q = qwen3_like();
  Placement p(q);
  for (std::int32_t b = 0; b < q.num_layers; ++b)
    for (std::int32_t e = 0; q.is_sparse(b) && e < q.num_experts; ++e) ASSERT_TRUE(p.set(b, e, {e % 4}).ok());
  ASSERT_TRUE(p.add(3, 2, 0).ok());
  const nlohmann::json j = p.to_json();
  ASSERT_EQ(j.size(), 6u);
  EXPECT_EQ(j[0], nlohmann::json::array());  // dense
  EXPECT_EQ(j[1].size(), 16u);
  nlohmann::json expected = round_robin_json(q);
  expected[3][2] = nlohmann::json::array({0, 2});
  EXPECT_EQ(j, expected);
  auto back = Placement::from_json(j, q.num_experts, q.sparse_layers);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, p);
  // Lists come in any order and are kept sorted, as set() keeps them.
  nlohmann::json unsorted = j;
  unsorted[1][0] = nlohmann::json::array({3, 1});
  auto sorted = Placement::from_json(unsorted, q.num_experts, q.sparse_layers);
  ASSERT_TRUE(sorted.ok()) << sorted.status().message();
  EXPECT_EQ(sorted->devices(1, 0), (std::vector<std::int32_t>{1, 3}));
}

TEST(PlacementTest, FromJsonRefusesWhatDoesNotFitTheModel) {
  const ModelConfig m = mixtral_like();
  const ModelConfig q = qwen3_like();  // blocks 0 and 2 are dense
  EXPECT_EQ(from_json_error(round_robin_json(m), m), "accepted");
  EXPECT_EQ(from_json_error("all", m), "placement must be a list with a list per block ([block][expert] -> devices)");
  EXPECT_EQ(from_json_error(nlohmann::json::array(), m), "placement has 0 blocks, the model has 4");
  EXPECT_EQ(from_json_error(round_robin_json(m), q), "placement has 4 blocks, the model has 6");

  nlohmann::json lists = round_robin_json(q);
  lists[0] = nlohmann::json::array({nlohmann::json::array({1})});
  EXPECT_EQ(from_json_error(lists, q), "block 0 is dense (no routed experts) but the placement lists experts");
  lists = round_robin_json(q);
  lists[1].erase(15);
  EXPECT_EQ(from_json_error(lists, q), "block 1 lists 15 experts, the model has 16");
  lists = round_robin_json(m);
  lists[1] = 7;
  EXPECT_EQ(from_json_error(lists, m),
            "block 1 must be a list with a list of devices per expert ([block][expert] -> devices)");
  lists = round_robin_json(m);
  lists[1][0] = 3;
  EXPECT_EQ(from_json_error(lists, m), "block 1 expert 0 must be a list of device indices, got 3");
  lists[1][0] = nlohmann::json::array({"gpu0"});
  EXPECT_EQ(from_json_error(lists, m), "block 1 expert 0: \"gpu0\" is not a device index");
  lists[1][0] = nlohmann::json::array({1.5});
  EXPECT_EQ(from_json_error(lists, m), "block 1 expert 0: 1.5 is not a device index");
  lists[1][0] = nlohmann::json::array({99999999999LL});
  EXPECT_EQ(from_json_error(lists, m), "block 1 expert 0: device 99999999999 is out of range");
  lists[1][0] = nlohmann::json::array({-1});
  EXPECT_EQ(from_json_error(lists, m), "block 1 expert 0: negative device index -1");
  lists[1][0] = nlohmann::json::array({2, 0, 2});
  EXPECT_EQ(from_json_error(lists, m), "block 1 expert 0: device 2 listed twice");
}

TEST(PlacementTest, FromJsonLeavesHolesAndUnknownDevicesToValidate) {
  const ModelConfig m = mixtral_like();
  nlohmann::json lists = round_robin_json(m);
  lists[2][5] = nlohmann::json::array();
  auto hole = Placement::from_json(lists, m.num_experts, m.sparse_layers);
  ASSERT_TRUE(hole.ok()) << hole.status().message();
  EXPECT_EQ(hole->validate(4).message(), "block 2 expert 5 is placed on no device");
  lists = round_robin_json(m);
  lists[3][1] = nlohmann::json::array({0, 4});
  auto unknown = Placement::from_json(lists, m.num_experts, m.sparse_layers);
  ASSERT_TRUE(unknown.ok()) << unknown.status().message();
  EXPECT_EQ(unknown->validate(4).message(), "block 3 expert 1 is placed on device 4, but there are 4 devices");
  EXPECT_TRUE(unknown->validate(5).ok());
}

TEST(PlacementTest, CheckShapeNamesTheFirstDifferenceFromTheModel) {
  const ModelConfig m = mixtral_like();
  const ModelConfig q = qwen3_like();
  const Placement p(m);
  EXPECT_TRUE(p.check_shape(m.num_experts, m.sparse_layers).ok());
  EXPECT_EQ(p.check_shape(q.num_experts, q.sparse_layers).message(),
            "placement covers 4 blocks x 8 experts, the model has 6 x 16");
  EXPECT_EQ(p.check_shape(4, m.sparse_layers).message(), "placement covers 4 blocks x 8 experts, the model has 4 x 4");
  EXPECT_EQ(p.check_shape(8, {true, false, true, true}).message(),
            "placement says block 1 is sparse, the model disagrees");
  EXPECT_EQ(Placement(q).check_shape(16, std::vector<bool>(6, true)).message(),
            "placement says block 0 is dense, the model disagrees");
}

TEST(PlacementTest, BlockDevicesIndexesTheBlocksListsByExpert) {
  const ModelConfig q = qwen3_like();
  Placement p(q);
  ASSERT_TRUE(p.set(3, 7, {1, 4}).ok());
  const auto& lists = p.block_devices(3);
  ASSERT_EQ(lists.size(), 16u);
  EXPECT_EQ(&lists[7], &p.devices(3, 7));
  EXPECT_EQ(lists[7], (std::vector<std::int32_t>{1, 4}));
  EXPECT_TRUE(lists[6].empty());
  for (const auto& dense : p.block_devices(0)) EXPECT_TRUE(dense.empty());
}

}  // namespace
}  // namespace sy
