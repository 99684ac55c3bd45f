// The Plans view's data: the engine's `plan` reply as rows, and the commands the view sends.
#include <gtest/gtest.h>

#include "console/model/plan_list.h"

namespace sy::console {
namespace {

using nlohmann::json;

// A reply in the shape of docs/control-protocol.md `plan` (two plans: one for the running
// devices, one that needs more).
json reply() {
  return json::parse(R"J({
    "ok": true, "cmd": "plan", "model": "mixtral-8x7b",
    "inputs": {"attention_hardware": "H20", "expert_hardware": "L40S"},
    "current": {"n_a": 2, "n_e": 4, "colocated": false, "policy": "async", "m": 2, "max_batch_per_rank": 64},
    "plans": [
      {"n_a": 2, "tp_a": 1, "n_e": 4, "tp_e": 1, "m": 3, "b_a": 120, "batch": 720, "devices": 6,
       "tokens_per_s": 51234.5, "token_latency_ms": 14.05, "tokens_per_s_per_price": 7001.2,
       "binding": "memory: 60.1 GiB", "applicable": true, "t_a_ms": 0.1},
      {"n_a": 6, "tp_a": 1, "n_e": 8, "tp_e": 2, "m": 4, "b_a": 683, "batch": 16392, "devices": 22,
       "tokens_per_s": 122709, "token_latency_ms": 133.6, "tokens_per_s_per_price": 4324,
       "binding": "batch limit", "applicable": false,
       "refused": "n_a: 6 attention devices, the deployment has 2 (device counts and tensor parallelism cannot change live)"}
    ]})J");
}

TEST(PlanList, ParsesTheEnginesReply) {
  auto list = parse_plan_reply(reply());
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(list->model, "mixtral-8x7b");
  EXPECT_EQ(list->hardware, "H20 / L40S");
  EXPECT_EQ(list->current, "2 attention + 4 expert devices, async m=2, 64 per rank");
  ASSERT_EQ(list->rows.size(), 2u);
  const PlanRow& a = list->rows[0];
  EXPECT_EQ(a.attention, "2x tp1");
  EXPECT_EQ(a.experts, "4x tp1");
  EXPECT_EQ(a.m, 3);
  EXPECT_EQ(a.b_a, 120);
  EXPECT_EQ(a.batch, 720);
  EXPECT_DOUBLE_EQ(a.tokens_per_s, 51234.5);
  EXPECT_DOUBLE_EQ(a.ms_per_token, 14.05);
  EXPECT_TRUE(a.applicable);
  EXPECT_FALSE(list->rows[1].applicable);
  EXPECT_EQ(list->rows[1].experts, "8x tp2");
  EXPECT_NE(list->rows[1].refused.find("n_a: 6"), std::string::npos);
}

TEST(PlanList, ApplySendsOnlyTheShape) {
  auto list = parse_plan_reply(reply());
  ASSERT_TRUE(list.ok());
  const json cmd = json::parse(apply_plan_request(list->rows[0]));
  EXPECT_EQ(cmd["cmd"], "apply_plan");
  EXPECT_EQ(cmd["plan"], json::parse(R"({"n_a":2,"tp_a":1,"n_e":4,"tp_e":1,"m":3,"b_a":120})"));
  EXPECT_EQ(json::parse(plan_request(5, 0)), json::parse(R"({"cmd":"plan","top":5})"));
  EXPECT_EQ(json::parse(plan_request(3, 50)), json::parse(R"({"cmd":"plan","top":3,"slo_ms":50.0})"));
}

TEST(PlanList, MalformedRepliesNameTheProblem) {
  json r = reply();
  r["plans"][1].erase("m");
  auto list = parse_plan_reply(r);
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("'m' must be an integer"), std::string::npos) << list.status().message();
  r = reply();
  r.erase("current");
  EXPECT_FALSE(parse_plan_reply(r).ok());
  EXPECT_FALSE(parse_plan_reply(json::array()).ok());
  r = reply();
  r["plans"][0]["applicable"] = "yes";
  EXPECT_FALSE(parse_plan_reply(r).ok());
}

}  // namespace
}  // namespace sy::console
