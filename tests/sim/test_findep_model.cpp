// FinDEP's schedule model and Algorithm 1: makespans worked out by hand from the constraints of
// Eq. 5, the task costs of Eqs. 10–11, and the polynomial solver against brute force.
#include <gtest/gtest.h>

#include <random>

#include "engine/sim/findep_model.h"

namespace sy {
namespace {

FindepProblem unit_problem() {
  FindepProblem p;
  p.costs.attention = {1, 1};  // t_a(m_a) = 1 + m_a
  p.costs.shared = {0, 1};     // t_s(m_a) = m_a
  p.costs.expert = {1, 0.5};   // t_e(m_e) = 1 + m_e / 2
  p.costs.a2e = {0, 0.25};     // t_a2e(m_e) = m_e / 4
  p.ag = 1;
  p.experts = 4;
  p.top_k = 2;
  p.seq_len = 2;  // m_e = m_a · 1 · 2 · 2 / (r2 · 4) = m_a / r2
  p.layers = 1;
  p.max_samples = 4;
  return p;
}

TEST(FindepMakespan, OneMicroBatchIsTheChainOfItsTasks) {
  const FindepProblem p = unit_problem();
  // m_a = 2: t_a = 3, t_s = 2, m_e = 2, t_a2e = 0.5, t_e = 2. Shared runs beside the A2E.
  EXPECT_DOUBLE_EQ(findep_makespan_us(p, {2, 1, 1, FindepOrder::Asas, 0}), 3 + 0.5 + 2 + 0.5);
  // Two chunks: m_e = 1, t_a2e = 0.25, t_e = 1.5: A2E 3–3.25, 3.25–3.5; experts 3.25–4.75,
  // 4.75–6.25; E2A of the last chunk 6.25–6.5.
  EXPECT_DOUBLE_EQ(findep_makespan_us(p, {2, 1, 2, FindepOrder::Asas, 0}), 6.5);
  // PPPipe: the shared expert is part of the attention task, so A2E starts after both.
  FindepProblem pp = p;
  pp.shared_inside_attention = true;
  EXPECT_DOUBLE_EQ(findep_makespan_us(pp, {2, 1, 1, FindepOrder::Asas, 0}), 3 + 2 + 0.5 + 2 + 0.5);
}

TEST(FindepMakespan, OrdersPlaceTheSharedExpertDifferently) {
  FindepProblem p = unit_problem();
  p.costs.shared = {0, 4};  // a long shared expert: t_s(1) = 4
  // m_a = 1, r1 = 2, r2 = 1: t_a = 2, t_s = 4, m_e = 1, t_a2e = 0.25, t_e = 1.5.
  // ASAS: A0 0–2, S0 2–6, A1 6–8, S1 8–12; micro-batch 1's experts wait for A1 at 8:
  // A2E 8–8.25, experts 8.25–9.75, E2A 9.75–10; the end is S1 at 12.
  EXPECT_DOUBLE_EQ(findep_makespan_us(p, {1, 2, 1, FindepOrder::Asas, 0}), 12);
  // AASS: A0 0–2, A1 2–4, S0 4–8, S1 8–12; micro-batch 1's experts are done by 6 instead of
  // 10, but the AG is the bottleneck and the end is 12 too.
  EXPECT_DOUBLE_EQ(findep_makespan_us(p, {1, 2, 1, FindepOrder::Aass, 0}), 12);
  p.layers = 2;
  // ASAS layer 1: A0 at max(12, ready 6) = 12–14, S0 14–18, A1 18–20, S1 20–24.
  EXPECT_DOUBLE_EQ(findep_makespan_us(p, {1, 2, 1, FindepOrder::Asas, 0}), 24);
  // AASS layer 1: A0 12–14, A1 14–16, S0 16–20, S1 20–24.
  EXPECT_DOUBLE_EQ(findep_makespan_us(p, {1, 2, 1, FindepOrder::Aass, 0}), 24);
  // Where the EG is the bottleneck: t_s = 1 (m_a = 1), t_e = 10.
  p.costs.shared = {0, 1};
  p.costs.expert = {9.5, 0.5};
  p.layers = 1;
  // ASAS: A0 0–2, S0 2–3, A1 3–5; experts of 0: 2.25–12.25, of 1: 12.25–22.25, E2A to 22.5;
  // AASS sends micro-batch 1 at 4 instead of 5, but it waits for the EG all the same.
  EXPECT_DOUBLE_EQ(findep_makespan_us(p, {1, 2, 1, FindepOrder::Asas, 0}), 22.5);
  EXPECT_DOUBLE_EQ(findep_makespan_us(p, {1, 2, 1, FindepOrder::Aass, 0}), 22.5);
}

TEST(FindepTaskCosts, FollowEquationsTenAndEleven) {
  FindepPrimitives prim{{2, 0.001}, {1, 0.0001}, {5, 0.01}};
  FindepModelDims d;
  d.hidden = 8, d.expert_hidden = 16, d.heads = 2, d.head_dim_k = 4, d.head_dim_v = 4;
  d.shared_experts = 1, d.experts = 8, d.top_k = 2, d.layers = 3, d.bytes_per_element = 2;
  const FindepTaskCosts c = findep_task_costs(prim, d, /*S=*/10, /*eg=*/4);
  EXPECT_DOUBLE_EQ(c.attention.alpha_us, 4 * 2 + 1);
  EXPECT_DOUBLE_EQ(c.attention.beta_us, 0.001 * (2 * 10 * 8 * 2 * 4 * 2) + 0.0001 * 100 * 2 * 8);
  EXPECT_DOUBLE_EQ(c.shared.alpha_us, 3 * 2);
  EXPECT_DOUBLE_EQ(c.shared.beta_us, 3 * 0.001 * 10 * 8 * 16);
  EXPECT_DOUBLE_EQ(c.expert.alpha_us, 3 * 2 * 2);  // E/eg = 2 local experts
  EXPECT_DOUBLE_EQ(c.expert.beta_us, 3 * 2 * 0.001 * 8 * 16);
  EXPECT_DOUBLE_EQ(c.a2e.alpha_us, 5);
  EXPECT_DOUBLE_EQ(c.a2e.beta_us, 0.01 * 2 * 8 * 2);
}

// Algorithm 1 against every (m_a, r1, r2, order) on random small problems: the same optimum,
// from far fewer schedules.
TEST(FindepSolver, FindsTheBruteForceOptimumOnSmallGrids) {
  std::mt19937_64 rng(16);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::int64_t solver_evaluated = 0, brute_evaluated = 0;
  for (int trial = 0; trial < 300; ++trial) {
    FindepProblem p;
    p.costs.attention = {u(rng) * 50, 0.1 + u(rng) * 20};
    p.costs.shared = trial % 3 == 0 ? LinearCost{} : LinearCost{u(rng) * 30, u(rng) * 15};
    p.costs.expert = {u(rng) * 80, 0.01 + u(rng) * 2};
    p.costs.a2e = {u(rng) * 40, 0.01 + u(rng) * 3};
    p.ag = 1 + static_cast<std::int64_t>(rng() % 4);
    p.experts = 8;
    p.top_k = 1 + static_cast<std::int64_t>(rng() % 4);
    p.seq_len = 4 + static_cast<std::int64_t>(rng() % 32);
    p.layers = 1 + static_cast<std::int64_t>(rng() % 4);
    p.max_samples = 1 + static_cast<std::int64_t>(rng() % 16);
    p.max_r2 = 1 + static_cast<std::int32_t>(rng() % 12);
    const FindepSolution fast = solve_findep(p);
    const FindepSolution all = brute_force_findep(p);
    ASSERT_GT(all.throughput, 0);
    EXPECT_NEAR(fast.throughput / all.throughput, 1.0, 1e-9)
        << "trial " << trial << ": solver m_a=" << fast.config.ma << " r1=" << fast.config.r1
        << " r2=" << fast.config.r2 << " " << order_name(fast.config.order) << "; brute force m_a=" << all.config.ma
        << " r1=" << all.config.r1 << " r2=" << all.config.r2 << " " << order_name(all.config.order);
    EXPECT_DOUBLE_EQ(fast.throughput, findep_throughput(p, fast.config));
    solver_evaluated += fast.evaluated;
    brute_evaluated += all.evaluated;
  }
  EXPECT_LT(solver_evaluated * 3, brute_evaluated);
}

TEST(FindepSolver, NeverLosesToTheBestPingPong) {
  std::mt19937_64 rng(61);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 100; ++trial) {
    FindepProblem p = unit_problem();
    p.costs.shared = {u(rng) * 10, u(rng) * 5};
    p.costs.a2e = {u(rng) * 10, u(rng) * 4};
    p.layers = 2;
    p.max_samples = 8;
    // PPPipe is FinDEP's space with the shared expert fused and r2 = 1, so FinDEP's optimum
    // is at least as good; it is strictly better whenever the shared expert can hide an A2E.
    EXPECT_GE(brute_force_findep(p).throughput, best_pppipe(p).throughput * (1 - 1e-12)) << trial;
  }
  FindepProblem p = unit_problem();
  p.costs.shared = {0, 2};
  EXPECT_GT(solve_findep(p).throughput, best_pppipe(p).throughput);
}

}  // namespace
}  // namespace sy
