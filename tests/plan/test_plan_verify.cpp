// The planner's prediction against the simulator serving the plan: the two share the kernel
// times (the roofline), so what differs is what the equations leave out — routing that is only
// uniform on average, requests finishing and joining mid-step, queueing on the network ports.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "engine/plan/plan_verify.h"
#include "engine/sim/hardware_profile.h"

namespace sy {
namespace {

PlanInputs mixtral_on_h100() {
  PlanInputs in;
  in.config = ModelConfig::from_file(std::string(SY_SOURCE_DIR) + "/assets/models/mixtral-8x7b/config.json").value();
  in.attention_hw = find_hardware_profile("h100").value();
  in.expert_hw = in.attention_hw;
  set_plan_lengths(in, LengthClass::Medium);
  return in;
}

// Two plans with batches small enough to simulate in seconds (measured: +1.6 % and +0.5 %).
// Bound: 10 %. The equations take a
// micro-batch's experts as uniformly loaded and every sequence as alive for the whole step; the
// simulator routes each token at random and replaces finished sequences as they end. Both
// effects are a few per cent at these batches (the README's --verify table shows −2 to −5 %
// at full batches), so a 10 % miss means the model and the simulator no longer describe the
// same deployment.
TEST(PlanVerify, PredictionMatchesTheSimulator) {
  const PlanInputs in = mixtral_on_h100();
  const PlanShape shapes[] = {{.tp_a = 1, .n_a = 2, .tp_e = 1, .n_e = 4, .m = 3, .b_a = 32},
                              {.tp_a = 1, .n_a = 1, .tp_e = 2, .n_e = 8, .m = 4, .b_a = 48}};
  PlanVerifyOptions o;
  o.window_s = 1;
  for (const PlanShape& s : shapes) {
    Plan p;
    p.shape = s;
    p.estimate = estimate_plan(in, s);
    ASSERT_TRUE(p.estimate.feasible()) << p.estimate.violations.front();
    const StatusOr<PlanVerifyResult> v = verify_plan(in, p, o);
    ASSERT_TRUE(v.ok()) << v.status().message();
    std::printf("n_a=%d tp_e=%d n_e=%d m=%d b_a=%d: predicted %.0f tokens/s (%.2f ms/token), simulated %.0f "
                "(ITL %.2f ms): error %+.1f%% in %.1f s\n",
                s.n_a, s.tp_e, s.n_e, s.m, s.b_a, v->predicted_tokens_per_s, v->predicted_latency_ms,
                v->simulated_tokens_per_s, v->simulated_itl_ms, 100 * v->error, v->wall_s);
    EXPECT_GT(v->simulated_tokens_per_s, 0);
    EXPECT_LT(std::abs(v->error), 0.10);
  }
}

// A plan the runtime cannot run is refused, not simulated: the runtime's micro-batch limit.
TEST(PlanVerify, RefusesMicroBatchesTheRuntimeCannotRun) {
  PlanInputs in = mixtral_on_h100();
  in.max_microbatches = 65;
  Plan p;
  p.shape = {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 8, .m = 65, .b_a = 1};
  p.estimate = estimate_plan(in, p.shape);
  const StatusOr<PlanVerifyResult> v = verify_plan(in, p, {});
  EXPECT_FALSE(v.ok());
}

}  // namespace
}  // namespace sy
