// PolicySpec: the checks and the JSON form shared by layout files and live policy switches.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/runtime/policy_spec.h"
#include "engine/runtime/runtime_policy.h"

namespace sy {
namespace {

TEST(PolicySpecTest, ValidateNamesTheBadField) {
  EXPECT_TRUE(validate_policy(PolicySpec{}).ok());
  EXPECT_TRUE(validate_policy({"sync", "flfs", 0, 1.0, 64}).ok());
  EXPECT_TRUE(validate_policy({"findep", "defrag", 3, 0.5, 2, 4}).ok());
  EXPECT_EQ(validate_policy({"turbo", "defrag", 3, 0.5, 2}).message(),
            "unknown policy 'turbo' (expected async, pingpong, sync, findep or adaptive)");
  EXPECT_EQ(validate_policy({"findep", "defrag", 3, 0.5, 2, 0}).message(), "expert_chunks must be in [1, 64], got 0");
  EXPECT_EQ(validate_policy({"async", "lifo", 3, 0.5, 2}).message(),
            "unknown scheduler 'lifo' (expected defrag, mtfs, flfs or tail)");
  EXPECT_EQ(validate_policy({"async", "defrag", -2, 0.5, 2}).message(), "lookahead must be in [0, 1024], got -2");
  // A lookahead the engine would spend its time (or memory) on is refused, not run.
  EXPECT_EQ(validate_policy({"async", "defrag", 1 << 30, 0.5, 2}).message(), "lookahead must be in [0, 1024], got 1073741824");
  EXPECT_TRUE(validate_policy({"async", "defrag", 1024, 0.5, 2}).ok());
  EXPECT_EQ(validate_policy({"async", "defrag", 3, -0.5, 2}).message(), "decay must be in (0, 1], got -0.5");
  EXPECT_EQ(validate_policy({"async", "defrag", 3, 0.5, 65}).message(), "microbatches must be in [1, 64], got 65");
}

TEST(PolicySpecTest, FromJsonAppliesChangesOverABase) {
  const PolicySpec base{"async", "mtfs", 2, 0.25, 3};
  auto p = PolicySpec::from_json(nlohmann::json{{"name", "pingpong"}, {"microbatches", 4}}, base);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, (PolicySpec{"pingpong", "mtfs", 2, 0.25, 4}));
  auto d = PolicySpec::from_json(nlohmann::json{{"decay", 1}});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->decay, 1.0);
  EXPECT_EQ(PolicySpec::from_json(base.to_json()).value(), base);

  const auto refused = [](const nlohmann::json& j) { return PolicySpec::from_json(j).status().message(); };
  EXPECT_EQ(refused({{"lookahaed", 2}}),
            "policy: unknown key 'lookahaed' (expected name, scheduler, lookahead, decay, microbatches, "
            "expert_chunks, order, barrier, gate, adaptive_pingpong_from or adaptive_async_from); did you mean "
            "'lookahead'?");
  EXPECT_EQ(refused({{"microbatches", 2.5}}), "policy: microbatches must be an integer, got 2.5");
  EXPECT_EQ(refused({{"microbatches", 0}}), "policy: microbatches must be in [1, 64], got 0");
  EXPECT_EQ(refused({{"expert_chunks", 65}}), "policy: expert_chunks must be in [1, 64], got 65");
  auto f = PolicySpec::from_json(nlohmann::json{{"name", "findep"}, {"microbatches", 3}, {"expert_chunks", 4}}, base);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(*f, (PolicySpec{"findep", "mtfs", 2, 0.25, 3, 4}));
  EXPECT_EQ(PolicySpec::from_json(f->to_json()).value(), *f);
  // findep's shared-expert order.
  auto aass = PolicySpec::from_json(nlohmann::json{{"order", "aass"}}, *f);
  ASSERT_TRUE(aass.ok()) << aass.status().message();
  EXPECT_EQ(aass->order, "aass");
  EXPECT_EQ(PolicySpec::from_json(aass->to_json()).value(), *aass);
  EXPECT_EQ(runtime_policy(*aass).value().order, SharedExpertOrder::Aass);
  EXPECT_EQ(policy_spec(runtime_policy(*aass).value()), *aass);
  EXPECT_EQ(refused({{"order", "sasa"}}), "policy: unknown order 'sasa' (expected asas or aass)");
  EXPECT_EQ(refused({{"order", 1}}), "policy: order must be a string, got 1");
  EXPECT_EQ(refused({{"lookahead", 5000000000LL}}), "policy: lookahead is out of range: 5000000000");
  EXPECT_EQ(refused({{"name", 3}}), "policy: name must be a string, got 3");
  EXPECT_EQ(refused({{"decay", "x"}}), "policy: decay must be a number, got \"x\"");
  EXPECT_EQ(refused({{"name", "warp"}}), "policy: unknown policy 'warp' (expected async, pingpong, sync, findep or adaptive)");
  EXPECT_EQ(refused(nlohmann::json::array()), "policy: expected a JSON object, got []");
}

TEST(PolicySpecTest, BarrierGateAndAdaptiveRoundTripAndReachTheRuntime) {
  auto p = PolicySpec::from_json(nlohmann::json{{"name", "sync"}, {"barrier", "ideal"}, {"gate", "cost"}});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->barrier, "ideal");
  EXPECT_EQ(PolicySpec::from_json(p->to_json()).value(), *p);
  const RuntimePolicy r = runtime_policy(*p).value();
  EXPECT_FALSE(r.collective_barrier);
  EXPECT_TRUE(r.gate);
  EXPECT_EQ(policy_spec(r), *p);
  // The defaults: what the systems AMoE measured pay, and the gate off.
  const RuntimePolicy d = runtime_policy(PolicySpec{}).value();
  EXPECT_TRUE(d.collective_barrier);
  EXPECT_FALSE(d.gate);
  EXPECT_FALSE(d.adaptive);

  auto a = PolicySpec::from_json(
      nlohmann::json{{"name", "adaptive"}, {"adaptive_pingpong_from", 100}, {"adaptive_async_from", 250.5}});
  ASSERT_TRUE(a.ok()) << a.status().message();
  const RuntimePolicy ra = runtime_policy(*a).value();
  EXPECT_TRUE(ra.adaptive);
  EXPECT_EQ(ra.kind, PolicyKind::Sync);  // until the first window has been observed
  EXPECT_EQ(ra.adaptive_async_from, 250.5);
  EXPECT_EQ(policy_spec(ra), *a);
  EXPECT_EQ(ra.describe(), "adaptive (now sync)");

  const auto refused = [](const nlohmann::json& j) { return PolicySpec::from_json(j).status().message(); };
  EXPECT_EQ(refused({{"barrier", "fence"}}), "policy: unknown barrier 'fence' (expected collective or ideal)");
  EXPECT_EQ(refused({{"gate", 1}}), "policy: gate must be a string, got 1");
  EXPECT_EQ(refused({{"gate", "on"}}), "policy: unknown gate 'on' (expected cost or off)");
  EXPECT_EQ(refused({{"adaptive_async_from", -1}}),
            "policy: adaptive_pingpong_from and adaptive_async_from must be >= 0, got 1e+09 and -1.0");
}
}  // namespace
}  // namespace sy
