#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "console/model/placement_preview.h"

namespace sy::console {
namespace {

telemetry::ExpertLoad load(std::int32_t block, std::int32_t expert, std::int32_t device, std::int64_t tokens) {
  telemetry::ExpertLoad l;
  l.block = block;
  l.expert = expert;
  l.device = device;
  l.tokens = tokens;
  return l;
}

// Two blocks, three experts on devices 0..2 (expert 2 of block 1 replicated on 1 and 2), device 3 empty.
struct Fixture {
  Placement placement{{{0}, {1}, {2}}, {{0}, {1}, {1, 2}}};
  LoadWindow window{0, 1, {load(0, 0, 0, 100), load(0, 1, 1, 10), load(0, 2, 2, 30), load(1, 0, 0, 40),
                           load(1, 1, 1, 20), load(1, 2, 1, 60), load(1, 2, 2, 20)}};
};

TEST(PlacementPreview, MoveShiftsTheMeasuredTokensOfThatReplica) {
  Fixture f;
  auto p = preview_placement(f.placement, 4, f.window, {PlacementChange::Kind::Move, 0, 0, 0, 3});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->before, (std::vector<double>{140, 90, 50, 0}));
  EXPECT_EQ(p->after, (std::vector<double>{40, 90, 50, 100}));
  EXPECT_EQ(p->placement_after[0][0], (std::vector<std::int32_t>{3}));
  EXPECT_EQ(p->placement_after[1], f.placement[1]);
}

TEST(PlacementPreview, ReplicaSplitsItsExpertsTokensEvenly) {
  Fixture f;
  auto p = preview_placement(f.placement, 4, f.window, {PlacementChange::Kind::Replicate, 1, 2, -1, 3});
  ASSERT_TRUE(p.ok()) << p.status().message();
  // Expert 2 of block 1 had 60 on device 1 and 20 on device 2: 80 over three replicas.
  const double share = 80.0 / 3.0;
  EXPECT_DOUBLE_EQ(p->after[1], 90 - 60 + share);
  EXPECT_DOUBLE_EQ(p->after[2], 50 - 20 + share);
  EXPECT_DOUBLE_EQ(p->after[3], share);
  EXPECT_DOUBLE_EQ(p->after[0], 140);
  EXPECT_EQ(p->placement_after[1][2], (std::vector<std::int32_t>{1, 2, 3}));
}

TEST(PlacementPreview, EveryBlockAppliesWhereItCan) {
  Fixture f;
  // Expert 2 lives on device 2 in both blocks; device 1 holds it only in block 1.
  auto p = preview_placement(f.placement, 4, f.window, {PlacementChange::Kind::Move, -1, 2, 2, 0});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->after, (std::vector<double>{140 + 30 + 20, 90, 0, 0}));
  auto none = preview_placement(f.placement, 4, f.window, {PlacementChange::Kind::Move, -1, 0, 3, 1});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("holds no replica"), std::string::npos);
}

TEST(PlacementPreview, ErrorsNameTheProblem) {
  Fixture f;
  auto check = [&](PlacementChange c, const std::string& needle) {
    auto p = preview_placement(f.placement, 4, f.window, c);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find(needle), std::string::npos) << p.status().message();
  };
  check({PlacementChange::Kind::Move, 0, 0, 1, 2}, "device 1 holds no replica of expert 0 of block 0");
  check({PlacementChange::Kind::Move, 1, 2, 1, 2}, "device 2 already holds a replica");
  check({PlacementChange::Kind::Move, 5, 0, 0, 1}, "block 5 does not exist");
  check({PlacementChange::Kind::Move, 0, 9, 0, 1}, "expert 9 does not exist");
  check({PlacementChange::Kind::Move, 0, 0, 0, 4}, "target device 4 does not exist");
  check({PlacementChange::Kind::Move, 0, 0, 0, 0}, "the same");
  check({PlacementChange::Kind::Replicate, 1, 2, -1, 1}, "already holds");
  EXPECT_FALSE(preview_placement({}, 4, f.window, {}).ok());
}

TEST(PlacementPreview, CommandsFollowTheControlProtocol) {
  const auto move = nlohmann::json::parse(PlacementChange{PlacementChange::Kind::Move, 5, 2, 4, 6}.command_json());
  EXPECT_EQ(move, nlohmann::json::parse(R"({"cmd":"move_expert","block":5,"expert":2,"from":4,"to":6})"));
  const auto rep =
      nlohmann::json::parse(PlacementChange{PlacementChange::Kind::Replicate, -1, 2, 4, 6}.command_json());
  EXPECT_EQ(rep, nlohmann::json::parse(R"({"cmd":"replicate_expert","block":-1,"expert":2,"to":6})"));
}

}  // namespace
}  // namespace sy::console
