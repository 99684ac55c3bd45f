// Algorithm 1: the search returns the best feasible plans, ranked by throughput per price, and
// the largest batch each shape allows.
#include <gtest/gtest.h>

#include <string>

#include "engine/plan/plan_search.h"
#include "tests/plan/plan_fixture.h"

namespace sy {
namespace {

// The hand-worked shape of test_plan_model.cpp: b_a = 4 fits the 100 000-byte attention GPU,
// b_a = 5 does not, so the binary search stops at 4 and names memory as the binding constraint.
TEST(PlanSearch, LargestBatchStopsAtTheBindingConstraint) {
  const PlanInputs in = test::tiny_inputs();
  Plan p;
  std::int64_t estimates = 0;
  ASSERT_TRUE(best_batch(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 1}, p, &estimates));
  EXPECT_EQ(p.shape.b_a, 4);
  EXPECT_EQ(p.binding.rfind("memory:", 0), 0u) << p.binding;
  EXPECT_NEAR(p.estimate.t_total, 0.681104, 1e-9);
  // A binary search over 1..64: a handful of evaluations, not 64.
  EXPECT_LE(estimates, 9);
  // m = 2 is below the minimum at every batch: no plan.
  EXPECT_FALSE(best_batch(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 2, .b_a = 1}, p));
  EXPECT_EQ(p.binding.rfind("micro-batches:", 0), 0u) << p.binding;
}

// An SLO between the step times of b_a = 2 and b_a = 3 binds there.
TEST(PlanSearch, SloLimitsTheBatch) {
  PlanInputs in = test::tiny_inputs();
  const PlanShape shape{.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 1};
  PlanShape s2 = shape, s3 = shape;
  s2.b_a = 2;
  s3.b_a = 3;
  const double t2 = estimate_plan(in, s2).t_total, t3 = estimate_plan(in, s3).t_total;
  ASSERT_LT(t2, t3);
  in.slo_ms = (t2 + t3) / 2;
  Plan p;
  ASSERT_TRUE(best_batch(in, shape, p));
  EXPECT_EQ(p.shape.b_a, 2);
  EXPECT_EQ(p.binding.rfind("slo:", 0), 0u) << p.binding;
}

// The search's best plan is the best of every feasible (shape, largest batch) it could have
// picked: checked against an exhaustive pass over the same space by best_batch.
TEST(PlanSearch, BestPlanBeatsEveryOtherFeasibleShape) {
  const PlanInputs in = test::tiny_inputs();
  const PlanSearchResult r = search_plans(in, 3);
  ASSERT_EQ(r.plans.size(), 3u);
  for (std::size_t i = 1; i < r.plans.size(); ++i)
    EXPECT_GE(r.plans[i - 1].estimate.tokens_per_s_per_price, r.plans[i].estimate.tokens_per_s_per_price);
  double best = 0;
  for (std::int32_t tp_a : {1, 2, 4})
    for (std::int32_t tp_e : {1, 2, 4})
      for (std::int32_t n_e : {1, 2, 4})
        for (std::int32_t n_a = 1; n_a * tp_a + n_e * tp_e <= in.max_devices; ++n_a)
          for (std::int32_t m = 1; m <= in.max_microbatches; ++m) {
            Plan p;
            if (best_batch(in, {.tp_a = tp_a, .n_a = n_a, .tp_e = tp_e, .n_e = n_e, .m = m, .b_a = 1}, p))
              best = std::max(best, p.estimate.tokens_per_s_per_price);
          }
  EXPECT_DOUBLE_EQ(r.plans.front().estimate.tokens_per_s_per_price, best);
  for (const Plan& p : r.plans) {
    EXPECT_TRUE(p.estimate.feasible());
    EXPECT_GE(p.shape.m, p.estimate.m_min);
  }
  // The shapes the memory of the expert GPU or constraint 3 rule out are counted, not lost.
  EXPECT_GT(r.rejected.count("micro-batches"), 0u);
}

// Throughput per price follows the profiles' prices: cheaper expert GPUs of the same speed give
// the same plan more tokens per price unit.
TEST(PlanSearch, PricesComeFromTheProfiles) {
  PlanInputs in = test::tiny_inputs();
  const PlanSearchResult a = search_plans(in, 1);
  in.expert_hw.price = 1;
  const PlanSearchResult b = search_plans(in, 1);
  ASSERT_FALSE(a.plans.empty());
  ASSERT_FALSE(b.plans.empty());
  EXPECT_GT(b.plans.front().estimate.tokens_per_s_per_price, a.plans.front().estimate.tokens_per_s_per_price);
  const PlanEstimate& e = b.plans.front().estimate;
  const PlanShape& s = b.plans.front().shape;
  EXPECT_DOUBLE_EQ(e.price, s.tp_a * s.n_a * 2.0 + s.tp_e * s.n_e * 1.0);
}

}  // namespace
}  // namespace sy
