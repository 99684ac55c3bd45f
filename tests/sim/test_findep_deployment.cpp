// The mapping of a running deployment (model shape, attention and expert devices, cost models,
// batch per rank, mean context) onto FinDEP's problem, and the solver's choice as a policy.
#include <gtest/gtest.h>

#include "engine/model/random_model.h"
#include "engine/sim/findep_deployment.h"

namespace sy {
namespace {

ModelConfig qwen2_moe() {
  ModelConfig c = preset_config(Arch::Qwen2Moe, ModelPreset::Tiny, kernels::DType::F32);
  c.sparse_layers.assign(static_cast<std::size_t>(c.num_layers), true);
  c.sparse_layers[0] = false;  // one dense block: not one of FinDEP's T layers
  return c;
}

FindepPrimitives unit_primitives() { return {{1, 1e-6}, {2, 1e-5}, {3, 1e-3}}; }

TEST(FindepDeployment, DimsComeFromTheModelShape) {
  const ModelConfig c = qwen2_moe();
  ASSERT_TRUE(c.has_shared_expert());
  const FindepModelDims d = findep_dims(c);
  EXPECT_EQ(d.hidden, c.hidden_size);
  EXPECT_EQ(d.expert_hidden, c.moe_intermediate_size);
  EXPECT_EQ(d.shared_experts, 1);
  EXPECT_EQ(d.shared_hidden, c.shared_expert_intermediate_size);
  EXPECT_EQ(d.heads, c.num_heads);
  EXPECT_EQ(d.head_dim_k, c.head_dim);
  EXPECT_EQ(d.experts, c.num_experts);
  EXPECT_EQ(d.top_k, c.top_k);
  EXPECT_EQ(d.layers, c.num_layers - 1);
}

TEST(FindepDeployment, DevicesBatchAndContextBecomeTheProblem) {
  const ModelConfig c = qwen2_moe();
  const Topology t = Topology::disaggregated(c, 2, 3);
  const FindepDeployment d = findep_deployment(c, t, unit_primitives(), 24, 100.5);
  EXPECT_EQ(d.attention_ranks, 2);
  EXPECT_EQ(d.expert_devices, 3);
  EXPECT_EQ(d.batch_per_rank, 24);
  EXPECT_DOUBLE_EQ(d.mean_context, 100.5);
  const FindepProblem p = findep_problem(d);
  EXPECT_EQ(p.ag, 2);
  EXPECT_EQ(p.experts, c.num_experts);
  EXPECT_EQ(p.top_k, c.top_k);
  EXPECT_EQ(p.seq_len, 1);  // a decode step: one query token per sample
  EXPECT_EQ(p.max_samples, 24);
  EXPECT_EQ(p.layers, c.num_layers - 1);
  // The task costs are Eqs. 1–4, 10–11 at S = 1 with the attention core over the context.
  const FindepTaskCosts want = findep_task_costs(unit_primitives(), d.dims, 1, 3, 100.5);
  EXPECT_DOUBLE_EQ(p.costs.attention.beta_us, want.attention.beta_us);
  EXPECT_DOUBLE_EQ(p.costs.expert.beta_us, want.expert.beta_us);
  EXPECT_GT(p.costs.shared.beta_us, 0);
  // Colocated: every device is a rank and holds experts.
  const FindepDeployment co = findep_deployment(c, Topology::colocated(c, 4), unit_primitives(), 8, 0);
  EXPECT_EQ(co.attention_ranks, 4);
  EXPECT_EQ(co.expert_devices, 4);
  EXPECT_DOUBLE_EQ(co.mean_context, 1);  // nothing running yet: one position
}

TEST(FindepDeployment, AttentionCostGrowsWithTheContext) {
  const FindepModelDims d = findep_dims(qwen2_moe());
  const FindepTaskCosts short_ctx = findep_task_costs(unit_primitives(), d, 1, 2, 10);
  const FindepTaskCosts long_ctx = findep_task_costs(unit_primitives(), d, 1, 2, 1000);
  const double core = unit_primitives().attention.beta_us * static_cast<double>(d.heads * (d.head_dim_k + d.head_dim_v));
  EXPECT_NEAR(long_ctx.attention.beta_us - short_ctx.attention.beta_us, core * 990, 1e-9 * core * 990);
  // Prefill (context = S) is the paper's S² term.
  EXPECT_DOUBLE_EQ(findep_task_costs(unit_primitives(), d, 7, 2).attention.beta_us,
                   findep_task_costs(unit_primitives(), d, 7, 2, 7).attention.beta_us);
}

TEST(FindepDeployment, SolverChoiceBecomesAFindepPolicy) {
  const ModelConfig c = qwen2_moe();
  const Topology t = Topology::disaggregated(c, 2, 2);
  FindepCostBasis basis{c, unit_primitives(), "unit test"};
  auto s = solve_findep_for(basis, t, 16, 64);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_GT(s->throughput, 0);
  EXPECT_LE(s->config.r1 * s->config.ma, 16);
  // It is Algorithm 1 on the mapped problem, and as good as brute force there.
  const FindepProblem p = findep_problem(findep_deployment(c, t, unit_primitives(), 16, 64));
  EXPECT_EQ(s->config, solve_findep(p).config);
  EXPECT_NEAR(s->throughput, brute_force_findep(p).throughput, 1e-9 * s->throughput);

  PolicySpec base;
  base.policy = "async";
  const PolicySpec spec = findep_policy_spec(base, *s);
  EXPECT_EQ(spec.policy, "findep");
  EXPECT_EQ(spec.microbatches, s->config.r1);
  EXPECT_EQ(spec.expert_chunks, s->config.r2);
  EXPECT_EQ(spec.order, s->config.order == FindepOrder::Aass ? "aass" : "asas");
  EXPECT_TRUE(validate_policy(spec).ok());
  const nlohmann::json j = findep_choice_json(*s, basis, t, 16, 64);
  EXPECT_EQ(j["r1"], s->config.r1);
  EXPECT_EQ(j["r2"], s->config.r2);
  EXPECT_EQ(j["attention_ranks"], 2);
  EXPECT_EQ(j["costs"], "unit test");

  // No cost model: refused with the reason.
  FindepCostBasis none{c, std::nullopt, "--hardware: no profile 'x'"};
  auto refused = solve_findep_for(none, t, 16, 64);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no profile 'x'"), std::string::npos);
}

}  // namespace
}  // namespace sy
