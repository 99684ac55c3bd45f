// The console's rebalance preview: a proposal reply read as the engine sends it, the commands
// that preview, apply and schedule rebalancing, and the whole-placement load preview.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "console/model/placement_preview.h"
#include "console/model/rebalance_proposal.h"

namespace sy::console {
namespace {

using nlohmann::json;

telemetry::ExpertLoad load(std::int32_t block, std::int32_t expert, std::int32_t device, std::int64_t tokens) {
  telemetry::ExpertLoad l;
  l.block = block;
  l.expert = expert;
  l.device = device;
  l.tokens = tokens;
  return l;
}

json reply() {
  return json::parse(R"({"ok":true,"cmd":"rebalance","applied":false,"proposal":{
    "id":3,"algorithm":"greedy","placement":[[[1,2],[1],[2]]],
    "load_before":[0,120,30],"load_after":[0,70,80],"imbalance_before":1.6,"imbalance_after":1.0666,
    "gain":0.3333,"slots":2,"replicas_before":3,"replicas_after":4,"window_ns":2000000000,
    "changes":[{"block":0,"expert":0,"old":[1],"new":[1,2]}]}})");
}

TEST(RebalanceProposal, ReadsTheEnginesPreviewReply) {
  auto p = parse_rebalance_reply(reply());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->id, 3);
  EXPECT_EQ(p->algorithm, "greedy");
  EXPECT_EQ(p->placement, (Placement{{{1, 2}, {1}, {2}}}));
  EXPECT_EQ(p->before, (std::vector<double>{0, 120, 30}));
  EXPECT_EQ(p->after, (std::vector<double>{0, 70, 80}));
  EXPECT_EQ(p->changes, 1);
  EXPECT_EQ(p->describe(), "greedy: max/mean 1.60 \u2192 1.07 (gain 33 %), 3 \u2192 4 replicas, 1 experts change");
  EXPECT_EQ(json::parse(rebalance_apply_request(*p)), (json{{"cmd", "rebalance"}, {"apply", true}, {"proposal", 3}}));

  json bad = reply();
  bad["proposal"].erase("gain");
  auto q = parse_rebalance_reply(bad);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(), "rebalance reply: 'gain' must be a number");
  bad = reply();
  bad["proposal"]["load_after"] = {1, 2};
  EXPECT_FALSE(parse_rebalance_reply(bad).ok());
}

TEST(RebalanceProposal, BuildsThePreviewAndPeriodicCommands) {
  EXPECT_EQ(json::parse(rebalance_preview_request("eplb")), (json{{"cmd", "rebalance"}, {"algorithm", "eplb"}}));
  EXPECT_EQ(json::parse(set_rebalance_request(false, 5, 1.2, "greedy")), (json{{"cmd", "set_rebalance"}, {"mode", "off"}}));
  EXPECT_EQ(json::parse(set_rebalance_request(true, 5, 1.2, "eplb")),
            (json{{"cmd", "set_rebalance"}, {"mode", "periodic"}, {"interval_s", 5}, {"threshold", 1.2}, {"algorithm", "eplb"}}));
}

TEST(RebalanceProposal, TheWholePlacementPreviewSpreadsEachExpertOverItsNewReplicas) {
  // Expert 0 (100 tokens, on device 1) gains a replica on device 2; expert 2 moves 2 -> 0.
  const Placement current{{{1}, {1}, {2}}};
  const Placement proposed{{{1, 2}, {1}, {0}}};
  const LoadWindow window{0, 1, {load(0, 0, 1, 100), load(0, 1, 1, 20), load(0, 2, 2, 30)}};
  auto p = preview_whole_placement(current, proposed, 3, window);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->before, (std::vector<double>{0, 120, 30}));
  EXPECT_EQ(p->after, (std::vector<double>{30, 70, 50}));
  EXPECT_EQ(p->placement_after, proposed);
  auto wrong = preview_whole_placement(current, Placement{{{1}, {1}}}, 3, window);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("has 2 experts, not 3"), std::string::npos);
  EXPECT_FALSE(preview_whole_placement(current, Placement{{{1}, {1}, {5}}}, 3, window).ok());
}

}  // namespace
}  // namespace sy::console
