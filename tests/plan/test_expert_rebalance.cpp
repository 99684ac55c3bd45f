// The expert rebalancing planners: MegaScale-Infer's greedy hot-expert replication and DeepSeek
// EPLB's replicate-then-pack, on hand-worked cases and, over random loads and shapes, the
// properties every proposal keeps (every expert placed, slots respected, expert devices only,
// never predicted worse than the current placement).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/plan/expert_rebalance.h"

namespace sy {
namespace {

using Devices = std::vector<std::int32_t>;

// One sparse block, expert e on the devices lists[e].
Placement one_block(const std::vector<Devices>& lists) {
  Placement p(1, static_cast<std::int32_t>(lists.size()), {true});
  for (std::size_t e = 0; e < lists.size(); ++e) EXPECT_TRUE(p.set(0, static_cast<std::int32_t>(e), lists[e]).ok());
  return p;
}

RebalanceInputs inputs(Placement p, std::vector<std::vector<double>> load, Devices devices, std::int32_t num_devices,
                       std::int32_t slots) {
  RebalanceInputs in;
  in.current = std::move(p);
  in.load = std::move(load);
  in.devices = std::move(devices);
  in.num_devices = num_devices;
  in.slots_per_device = slots;
  return in;
}

TEST(ExpertRebalanceTest, GreedyReplicatesTheHotExpertOfTheHottestDeviceOntoTheColdOne) {
  // d0 holds e0 (8 tokens) and e1 (4), d1 holds e2 and e3 (2 each): C = 12 and 4. One more
  // replica of e0 on d1 gives 4 + 4 and 4 + 4; after that d1 has no free slot.
  const auto in = inputs(one_block({{0}, {0}, {1}, {1}}), {{8, 4, 2, 2}}, {0, 1}, 2, 3);
  auto p = plan_rebalance(RebalanceAlgorithm::Greedy, in);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->placement.devices(0, 0), (Devices{0, 1}));
  EXPECT_EQ(p->placement.devices(0, 1), (Devices{0}));
  EXPECT_EQ(p->placement.devices(0, 2), (Devices{1}));
  EXPECT_EQ(p->placement.devices(0, 3), (Devices{1}));
  EXPECT_EQ(p->load_before, (std::vector<double>{12, 4}));
  EXPECT_EQ(p->load_after, (std::vector<double>{8, 8}));
  EXPECT_DOUBLE_EQ(p->imbalance_before, 1.5);
  EXPECT_DOUBLE_EQ(p->imbalance_after, 1.0);
  EXPECT_DOUBLE_EQ(p->gain, 1.0 / 3.0);
  EXPECT_EQ(p->replicas_before, 4);
  EXPECT_EQ(p->replicas_after, 5);
  EXPECT_EQ(p->changed_experts, 1);
  const nlohmann::json j = to_json(*p, in.current);
  EXPECT_EQ(j["algorithm"], "greedy");
  ASSERT_EQ(j["changes"].size(), 1u);
  EXPECT_EQ(j["changes"][0]["expert"], 0);
  EXPECT_EQ(j["changes"][0]["old"], (Devices{0}));
  EXPECT_EQ(j["changes"][0]["new"], (Devices{0, 1}));
}

TEST(ExpertRebalanceTest, GreedyStopsWhenNoReplicaLowersTheMaximum) {
  // Already even: nothing to add, though slots are free.
  const auto in = inputs(one_block({{0}, {1}}), {{5, 5}}, {0, 1}, 2, 4);
  auto p = plan_rebalance(RebalanceAlgorithm::Greedy, in);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->placement, in.current);
  EXPECT_EQ(p->gain, 0);
  EXPECT_EQ(p->changed_experts, 0);
}

TEST(ExpertRebalanceTest, GreedyChargesColdExpertsTheFloorK) {
  // d0 holds e0 (6 tokens) and the idle e1, d1 holds e2 (4). By tokens alone d0 (6) is the
  // maximum and a second e0 on d1 would make d1 7: no change. With K = 4 every replica costs at
  // least 4: C = 10 and 4, and a second e0 (3 tokens each, charged 4) gives 8 and 8.
  auto in = inputs(one_block({{0}, {0}, {1}}), {{6, 0, 4}}, {0, 1}, 2, 3);
  auto p = plan_rebalance(RebalanceAlgorithm::Greedy, in);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->placement, in.current);
  in.min_load = 4;
  p = plan_rebalance(RebalanceAlgorithm::Greedy, in);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->placement.devices(0, 0), (Devices{0, 1}));
  EXPECT_EQ(p->placement.devices(0, 1), (Devices{0}));
  EXPECT_EQ(p->load_after, (std::vector<double>{3, 7}));  // predictions stay in tokens
}

TEST(ExpertRebalanceTest, AReplicaThatCostsMoreThanItRelievesIsNotAdded) {
  // The first case's hot e0 (8 tokens): with K = 5 its two replicas would cost 5 each, d0 10
  // and d1 15 (e2, e3 at 5 each): worse than 13 and 10 now. Without K it is added.
  auto in = inputs(one_block({{0}, {0}, {1}, {1}}), {{8, 4, 2, 2}}, {0, 1}, 2, 3);
  in.min_load = 5;
  for (RebalanceAlgorithm a : {RebalanceAlgorithm::Greedy, RebalanceAlgorithm::Eplb}) {
    auto p = plan_rebalance(a, in);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->replicas_after, 4) << rebalance_algorithm_name(a);
  }
  in.min_load = 0;
  auto p = plan_rebalance(RebalanceAlgorithm::Greedy, in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->replicas_after, 5);
}

TEST(ExpertRebalanceTest, EplbReplicatesTheHeaviestThenPacksEvenly) {
  // 2 devices × 3 slots = 6 replicas for 4 experts: e0 gets the first extra (8 → 4 + 4), then
  // e1 (4 → 2 + 2; e0 already has a replica per device). Packing heaviest first onto the
  // lightest device with a free slot that lacks the expert: e0→d0, e0→d1, e1→d0, e1→d1,
  // e2→d0, e3→d1: 8 and 8.
  const auto in = inputs(one_block({{0}, {0}, {1}, {1}}), {{8, 4, 2, 2}}, {0, 1}, 2, 3);
  auto p = plan_rebalance(RebalanceAlgorithm::Eplb, in);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->placement.devices(0, 0), (Devices{0, 1}));
  EXPECT_EQ(p->placement.devices(0, 1), (Devices{0, 1}));
  EXPECT_EQ(p->placement.devices(0, 2), (Devices{0}));
  EXPECT_EQ(p->placement.devices(0, 3), (Devices{1}));
  EXPECT_EQ(p->load_after, (std::vector<double>{8, 8}));
  EXPECT_EQ(p->replicas_after, 6);
}

TEST(ExpertRebalanceTest, EplbMovesExpertsWithoutRedundantSlots) {
  // One slot per expert: EPLB can only re-pack. Hot e0 and e1 together on d0 (10 + 9 vs 1 + 0)
  // become e0 + e3 and e1 + e2.
  const auto in = inputs(one_block({{0}, {0}, {1}, {1}}), {{10, 9, 1, 0}}, {0, 1}, 2, 2);
  auto p = plan_rebalance(RebalanceAlgorithm::Eplb, in);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->placement.devices(0, 0), (Devices{0}));
  EXPECT_EQ(p->placement.devices(0, 1), (Devices{1}));
  EXPECT_EQ(p->load_after, (std::vector<double>{10, 10}));
  // Greedy only adds replicas, and there is no free slot: nothing changes.
  auto g = plan_rebalance(RebalanceAlgorithm::Greedy, in);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->placement, in.current);
}

TEST(ExpertRebalanceTest, RefusesInputsItCannotPlanWithAMessage) {
  const auto base = inputs(one_block({{0}, {0}, {1}, {1}}), {{1, 1, 1, 1}}, {0, 1}, 2, 2);
  auto in = base;
  in.slots_per_device = 1;
  auto p = plan_rebalance(RebalanceAlgorithm::Eplb, in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("cannot hold the 4 experts"), std::string::npos) << p.status().message();
  in = base;
  in.load = {{1, 1, 1}};
  p = plan_rebalance(RebalanceAlgorithm::Greedy, in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("load of block 0 has 3 experts"), std::string::npos) << p.status().message();
  in = base;
  in.devices = {1};
  in.slots_per_device = 4;
  p = plan_rebalance(RebalanceAlgorithm::Greedy, in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("not an expert device"), std::string::npos) << p.status().message();
  in = base;
  in.current = one_block({{0}, {0}, {0}, {1}});
  p = plan_rebalance(RebalanceAlgorithm::Greedy, in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("holds 3 experts of block 0, more than its 2 slots"), std::string::npos);
  EXPECT_FALSE(parse_rebalance_algorithm("eplb2").ok());
}

TEST(ExpertRebalanceTest, EveryProposalPlacesEveryExpertWithinSlotsAndIsNeverWorse) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const std::int32_t attention = static_cast<std::int32_t>(rng() % 3);
    const std::int32_t n = 2 + static_cast<std::int32_t>(rng() % 5);
    const std::int32_t experts = n + static_cast<std::int32_t>(rng() % (3 * n));
    const std::int32_t blocks = 1 + static_cast<std::int32_t>(rng() % 3);
    std::vector<bool> sparse(static_cast<std::size_t>(blocks), true);
    sparse[0] = blocks == 1;  // a dense first block when there are several
    Placement current(blocks, experts, sparse);
    std::vector<std::vector<double>> load(static_cast<std::size_t>(blocks));
    std::exponential_distribution<double> tokens(0.01);
    const double lambda = 0.1 * static_cast<double>(rng() % 10);
    for (std::int32_t b = 0; b < blocks; ++b) {
      if (!sparse[static_cast<std::size_t>(b)]) continue;
      for (std::int32_t e = 0; e < experts; ++e) {
        ASSERT_TRUE(current.set(b, e, {attention + e % n}).ok());
        load[static_cast<std::size_t>(b)].push_back(tokens(rng) * std::exp(-lambda * e));
      }
    }
    Devices devices;
    for (std::int32_t d = attention; d < attention + n; ++d) devices.push_back(d);
    const std::int32_t slots = (experts + n - 1) / n + static_cast<std::int32_t>(rng() % 3);
    auto in = inputs(current, load, devices, attention + n, slots);
    const bool with_k = trial % 3 == 0;  // K floors replicas; the token checks below hold without it
    if (with_k) in.min_load = 20;
    for (RebalanceAlgorithm a : {RebalanceAlgorithm::Greedy, RebalanceAlgorithm::Eplb}) {
      auto p = plan_rebalance(a, in);
      ASSERT_TRUE(p.ok()) << p.status().message();
      ASSERT_TRUE(p->placement.validate(attention + n).ok());
      ASSERT_TRUE(p->placement.check_shape(experts, sparse).ok());
      const auto per_block = predicted_block_load(p->placement, load, attention + n);
      for (std::int32_t b = 0; b < blocks; ++b) {
        if (!sparse[static_cast<std::size_t>(b)]) continue;
        std::vector<std::int32_t> used(static_cast<std::size_t>(attention + n), 0);
        for (std::int32_t e = 0; e < experts; ++e) {
          const Devices& on = p->placement.devices(b, e);
          ASSERT_FALSE(on.empty());
          for (std::int32_t d : on) {
            ASSERT_GE(d, attention) << "an expert on an attention device";
            ++used[static_cast<std::size_t>(d)];
          }
          if (a == RebalanceAlgorithm::Greedy) {  // greedy only adds replicas
            for (std::int32_t d : current.devices(b, e)) ASSERT_TRUE(p->placement.holds(b, e, d));
          }
        }
        for (std::int32_t d : devices) ASSERT_LE(used[static_cast<std::size_t>(d)], slots);
      }
      double total_before = 0, total_after = 0;
      for (std::size_t d = 0; d < p->load_before.size(); ++d) {
        total_before += p->load_before[d];
        total_after += p->load_after[d];
      }
      EXPECT_NEAR(total_after, total_before, 1e-6 * total_before);  // no token lost or invented
      if (with_k) continue;
      EXPECT_LE(p->imbalance_after, p->imbalance_before + 1e-9);
      EXPECT_GE(p->gain, 0);
      // Each layer's slowest device carries no more than before.
      const auto before_blocks = predicted_block_load(current, load, attention + n);
      for (std::int32_t b = 0; b < blocks; ++b) {
        if (before_blocks[static_cast<std::size_t>(b)].empty()) continue;
        const auto& x = before_blocks[static_cast<std::size_t>(b)];
        const auto& y = per_block[static_cast<std::size_t>(b)];
        EXPECT_LE(*std::max_element(y.begin(), y.end()), *std::max_element(x.begin(), x.end()) * (1 + 1e-9))
            << "trial " << trial << " block " << b;
      }
    }
  }
}

}  // namespace
}  // namespace sy
