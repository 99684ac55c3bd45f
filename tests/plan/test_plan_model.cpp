// MegaScale-Infer's performance model (§4.1–4.2) against a case worked by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/plan/plan_model.h"
#include "tests/plan/plan_fixture.h"

namespace sy {
namespace {

bool has_violation(const PlanEstimate& e, const std::string& kind) {
  for (const std::string& v : e.violations)
    if (v.rfind(kind + ":", 0) == 0) return true;
  return false;
}

// The tiny model (h = 64, 4 heads of 16, 1 KV head, experts of width 128, E = 4, K = 2, L = 2,
// vocabulary 100) on the round profiles, tp_a = tp_e = 1, n_a = 1, n_e = 2, m = 3, b_a = 4,
// s = 10 (40 cached positions), kv_len = 20. Every GEMM is bound by streaming its weights
// (2 bytes per parameter at 1 byte/ns): compute is 2·P·n / 1000 ns, far below.
//   Ta: QKV 64·(64+2·16) = 6144 params → 12288 ns; output 64·64 → 8192 ns; KV read
//       40 positions · 2 · 16 · 2 bytes = 2560 ns; norms/RoPE 4·4·64·2 = 2048 ns; router
//       64·4 → 512 ns. Ta = 25 600 ns.
//   b_e = b_a·n_a·K/E = 4·1·2/4 = 2 rows per expert; an expert node holds E/n_e = 2 experts.
//   Te: per expert gate/up 2·64·128 → 32768 ns, down 64·128 → 16384 ns, SiLU pass
//       3·2·128·2 = 1536 ns: 50 688 ns; two experts: Te = 101 376 ns = Tf.
//   Tc (Eq. 6): send b_a·K = 8 rows of 128 bytes at 1 byte/ns + 1000 ns = 2024 ns; receive
//       b_e·2 = 4 rows: 1512 ns. Tc = 2024 ns.
//   m_min = ⌈2·(1 + 2024/101376)⌉ = ⌈2.04⌉ = 3.
//   Sampling: lm_head 64·100 → 12800 ns, logits 4·100·4 = 1600 ns: 14 400 ns.
//   T_total (Eq. 5 + sampling) = (25600 + 101376 + 2·2024) + 101376·(3·2 − 1) + 3·14400
//                              = 131 024 + 506 880 + 43 200 = 681 104 ns.
//   Eq. 4: 131 024 + 3·101 376·1 = 435 152 ≤ T_iter ≤ 3·101 376·2 = 608 256 ns.
//   B = 4·3·1 = 12; throughput 12 / 681.104 µs = 17 618.3 tokens/s; price 1·2 + 2·3 = 8.
//   Memory (Eq. 8): P_a = embeddings 2·100·64 + final norm 64 + per layer (norms 128,
//       q/k/v/o 10240, router 256) · 2 = 34 112 params; KV 2·2 bytes·3·4·20·16·2 layers =
//       30 720 bytes: 98 944 bytes per attention GPU. Experts: 2 experts · 2 layers ·
//       3·64·128 · 2 bytes = 196 608 bytes per expert GPU.
TEST(PlanModel, HandWorkedCase) {
  const PlanInputs in = test::tiny_inputs();
  const PlanEstimate e = estimate_plan(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 4});
  EXPECT_TRUE(e.feasible()) << (e.violations.empty() ? "" : e.violations.front());
  EXPECT_NEAR(e.t_a, 0.025600, 1e-9);
  EXPECT_NEAR(e.b_e, 2.0, 1e-12);
  EXPECT_NEAR(e.t_e, 0.101376, 1e-9);
  EXPECT_NEAR(e.t_f, 0.101376, 1e-9);
  EXPECT_NEAR(e.t_c, 0.002024, 1e-9);
  EXPECT_EQ(e.m_min, 3);
  EXPECT_NEAR(e.t_sample, 0.014400, 1e-9);
  EXPECT_NEAR(e.t_iter_low, 0.435152, 1e-9);
  EXPECT_NEAR(e.t_iter_high, 0.608256, 1e-9);
  EXPECT_NEAR(e.t_total, 0.681104, 1e-9);
  EXPECT_EQ(e.batch, 12);
  EXPECT_NEAR(e.tokens_per_s, 12 / 681.104e-6, 1e-6);
  EXPECT_DOUBLE_EQ(e.price, 8);
  EXPECT_NEAR(e.tokens_per_s_per_price, 12 / 681.104e-6 / 8, 1e-6);
  EXPECT_EQ(e.devices, 3);
  EXPECT_NEAR(attention_parameters(in.config), 34112, 1e-9);
  EXPECT_NEAR(expert_parameters(in.config), 2 * 3 * 64 * 128, 1e-9);
  EXPECT_NEAR(e.attention_mem_gib * 1073741824.0, 98944, 1e-6);
  EXPECT_NEAR(e.expert_mem_gib * 1073741824.0, 196608, 1e-6);
}

// Tensor parallelism divides every GEMM's weights, the KV read and the activations' passes, and
// widens the node's network by tp NICs.
TEST(PlanModel, TensorParallelHalvesStreamingTimes) {
  const PlanInputs in = test::tiny_inputs();
  const PlanEstimate one = estimate_plan(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 4});
  const PlanEstimate two = estimate_plan(in, {.tp_a = 2, .n_a = 1, .tp_e = 2, .n_e = 2, .m = 3, .b_a = 4});
  // Ta: the weights' and KV streaming halve, (12288 + 8192 + 2560 + 512)/2; the roofline does
  // not split the elementwise pass over the b_a·h activations: its 2048 ns stay whole.
  EXPECT_NEAR(two.t_a, (12288.0 + 8192 + 2560 + 512) / 2 * 1e-6 + 0.002048, 1e-9);
  // Te: the GEMMs halve, the SiLU pass (no tp) stays: 2·(49152/2 + 1536).
  EXPECT_NEAR(two.t_e, 2 * (49152.0 / 2 + 1536) * 1e-6, 1e-9);
  // Tc: the send side has 2 NICs: 1000 + 1024/2.
  EXPECT_NEAR(two.t_c, 0.001512, 1e-9);
  EXPECT_DOUBLE_EQ(two.price, 2 * 2 + 2 * 2 * 3);
  EXPECT_LT(two.t_total, one.t_total);
}

// Constraint 3: with Tc/Tf = 0.02, at least 3 micro-batches; 1 and 2 are refused, by name.
TEST(PlanModel, FewerMicroBatchesThanTheMinimumAreRejected) {
  const PlanInputs in = test::tiny_inputs();
  for (std::int32_t m : {1, 2}) {
    const PlanEstimate e = estimate_plan(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = m, .b_a = 4});
    EXPECT_EQ(e.m_min, 3);
    EXPECT_TRUE(has_violation(e, "micro-batches")) << "m=" << m;
  }
  // m = 4 holds 4·4 sequences' KV, more than the attention GPU's memory: 3 per micro-batch fit.
  EXPECT_TRUE(estimate_plan(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 4, .b_a = 3}).feasible());
}

// Slow communication: Tc/Tf ≥ 1/2 asks for 4 micro-batches; Tc ≥ Tf breaks constraint 2.
TEST(PlanModel, SlowNetworkRaisesTheMinimumThenBreaksConstraintTwo) {
  PlanInputs in = test::tiny_inputs();
  // 0.02 bytes/ns: Tc = 1000 + 1024/0.02 = 52 200 ns; Tf = 101 376: ratio 0.515 → m_min = 4.
  in.attention_hw.nic_gbps = in.expert_hw.nic_gbps = 0.02;
  PlanEstimate e = estimate_plan(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 4});
  EXPECT_NEAR(e.t_c, 0.0522, 1e-9);
  EXPECT_EQ(e.m_min, 4);
  EXPECT_TRUE(has_violation(e, "micro-batches"));
  // 0.01 bytes/ns: Tc = 103 400 ns > Tf.
  in.attention_hw.nic_gbps = in.expert_hw.nic_gbps = 0.01;
  e = estimate_plan(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 4, .b_a = 4});
  EXPECT_TRUE(has_violation(e, "communication"));
}

// Eq. 8: b_a = 5 needs 68 224 + 38 400 = 106 624 bytes > the attention GPU's 100 000.
TEST(PlanModel, KvCacheBeyondMemoryIsRejected) {
  const PlanInputs in = test::tiny_inputs();
  EXPECT_TRUE(estimate_plan(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 4}).feasible());
  const PlanEstimate e = estimate_plan(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 5});
  EXPECT_NEAR(e.attention_mem_gib * 1073741824.0, 106624, 1e-6);
  EXPECT_TRUE(has_violation(e, "memory"));
  // With tp_a = 2 the same batch fits: 106 624 / 2 per GPU.
  EXPECT_TRUE(estimate_plan(in, {.tp_a = 2, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 5}).feasible());
}

// Eq. 7: the step time over the SLO is refused.
TEST(PlanModel, SloIsEnforced) {
  PlanInputs in = test::tiny_inputs();
  in.slo_ms = 0.68;  // T_total is 0.681104 ms
  const PlanEstimate e = estimate_plan(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 4});
  EXPECT_TRUE(has_violation(e, "slo"));
  in.slo_ms = 0.69;
  EXPECT_TRUE(estimate_plan(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 4}).feasible());
}

// Algorithm 1 line 4 and the shape's own limits.
TEST(PlanModel, ShapesThatCannotExistAreRejected) {
  const PlanInputs in = test::tiny_inputs();
  // Two experts per node (196 608 bytes) do not fit an expert GPU of 150 000 bytes; they fit
  // two of them (tp_e = 2).
  PlanInputs small = in;
  small.expert_hw.memory_gib = 150000 / 1073741824.0;
  const auto v = shape_violations(small, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 1});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v.front().rfind("weights: expert weights", 0), 0u) << v.front();
  EXPECT_TRUE(shape_violations(small, {.tp_a = 1, .n_a = 1, .tp_e = 2, .n_e = 2, .m = 3, .b_a = 1}).empty());
  EXPECT_EQ(shape_violations(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 3, .m = 3, .b_a = 1}),
            std::vector<std::string>{"shape: n_e=3 does not divide the 4 experts"});
  EXPECT_FALSE(shape_violations(in, {.tp_a = 3, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 1}).empty());
  EXPECT_FALSE(shape_violations(in, {.tp_a = 8, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 1}).empty());  // node of 4
  EXPECT_FALSE(shape_violations(in, {.tp_a = 1, .n_a = 1, .tp_e = 1, .n_e = 2, .m = 5, .b_a = 1}).empty());  // N_m = 4
  EXPECT_FALSE(shape_violations(in, {.tp_a = 4, .n_a = 2, .tp_e = 1, .n_e = 2, .m = 3, .b_a = 1}).empty());  // 10 > 8 GPUs
}

}  // namespace
}  // namespace sy
