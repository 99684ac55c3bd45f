// The block-balanced placement: a hand-worked block of AMoE's skew (λ = 0.5, 8 experts on 4
// devices), the dealing of groups over blocks, the bound it keeps on random loads, and the
// inputs it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/plan/block_balanced_placement.h"

namespace sy {
namespace {

using Devices = std::vector<std::int32_t>;

// exp(-0.5 · rank), expert e at rank e.
const std::vector<double> kSkew = {1.0, 0.607, 0.368, 0.223, 0.135, 0.082, 0.050, 0.030};

TEST(BlockBalancedPlacementTest, PairsEachBlocksHottestExpertWithItsColdest) {
  auto p = block_balanced_placement({kSkew}, {4, 5, 6, 7}, 8);
  ASSERT_TRUE(p.ok()) << p.status().message();
  // LPT: 0,1,2,3 open the four groups; 4 joins 3, 5 joins 2, 6 joins 1, 7 joins 0. The first
  // block deals the heaviest group to the first device.
  const Devices want = {4, 5, 6, 7, 7, 6, 5, 4};
  for (std::int32_t e = 0; e < 8; ++e) EXPECT_EQ(p->devices(0, e), Devices{want[static_cast<std::size_t>(e)]}) << e;
}

TEST(BlockBalancedPlacementTest, DealsTheNextBlocksHeaviestGroupToTheLeastLoadedDevice) {
  // Block 1 is dense; block 2 repeats block 0's load with the ranks reversed. After block 0
  // device 7 holds the lightest pair (experts 3 and 4), so block 2's heaviest pair goes there.
  std::vector<double> reversed(kSkew.rbegin(), kSkew.rend());
  auto p = block_balanced_placement({kSkew, {}, reversed}, {4, 5, 6, 7}, 8);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(p->is_sparse(1));
  EXPECT_EQ(p->devices(2, 7), Devices{7});  // the hottest of block 2
  EXPECT_EQ(p->devices(2, 0), Devices{7});  // with its coldest
  EXPECT_EQ(p->devices(2, 6), Devices{6});
  EXPECT_EQ(p->devices(2, 4), Devices{4});  // the lightest pair to the heaviest device
}

TEST(BlockBalancedPlacementTest, KeepsDeviceTotalsWithinOneGroupOnRandomLoads) {
  // Dealing sorted groups against sorted totals never widens the spread of the totals beyond
  // the larger of the spread before and the heaviest group: over any blocks it stays within
  // the heaviest group. Each block also places every expert once, ceil(E/D) slots a device.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const std::int32_t experts = 1 + static_cast<std::int32_t>(rng() % 16);
    const std::int32_t n_dev = 1 + static_cast<std::int32_t>(rng() % 6);
    const std::int32_t blocks = 1 + static_cast<std::int32_t>(rng() % 40);
    Devices devices(static_cast<std::size_t>(n_dev));
    for (std::int32_t d = 0; d < n_dev; ++d) devices[static_cast<std::size_t>(d)] = 2 * d + 1;  // not 0..D-1
    std::vector<std::vector<double>> load(static_cast<std::size_t>(blocks));
    for (auto& row : load) {
      if (rng() % 5 == 0) continue;  // dense
      row.resize(static_cast<std::size_t>(experts));
      for (double& l : row) l = std::exponential_distribution<double>(1.0)(rng);
    }
    auto p = block_balanced_placement(load, devices, experts);
    ASSERT_TRUE(p.ok()) << p.status().message();
    ASSERT_TRUE(p->validate(2 * n_dev).ok());
    const std::size_t slots = (static_cast<std::size_t>(experts) + devices.size() - 1) / devices.size();
    std::vector<double> total(static_cast<std::size_t>(2 * n_dev), 0.0);
    double heaviest_group = 0;
    for (std::int32_t b = 0; b < blocks; ++b) {
      if (!p->is_sparse(b)) continue;
      std::vector<double> block_load(total.size(), 0.0);
      std::vector<std::size_t> held(total.size(), 0);
      for (std::int32_t e = 0; e < experts; ++e) {
        ASSERT_EQ(p->devices(b, e).size(), 1u);
        const auto d = static_cast<std::size_t>(p->devices(b, e)[0]);
        ASSERT_EQ(d % 2, 1u) << "expert placed off the expert devices";
        block_load[d] += load[static_cast<std::size_t>(b)][static_cast<std::size_t>(e)];
        ++held[d];
      }
      for (std::size_t d = 0; d < total.size(); ++d) {
        EXPECT_LE(held[d], slots);
        total[d] += block_load[d];
        heaviest_group = std::max(heaviest_group, block_load[d]);
      }
    }
    double lo = 1e300, hi = 0;
    for (std::int32_t d : devices) {
      lo = std::min(lo, total[static_cast<std::size_t>(d)]);
      hi = std::max(hi, total[static_cast<std::size_t>(d)]);
    }
    EXPECT_LE(hi - lo, heaviest_group + 1e-9) << "trial " << trial;
  }
}

TEST(BlockBalancedPlacementTest, RefusesBadInputsNamingThem) {
  auto none = block_balanced_placement({kSkew}, {}, 8);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no expert devices"), std::string::npos);
  auto short_row = block_balanced_placement({kSkew, {1.0, 2.0}}, {0, 1}, 8);
  ASSERT_FALSE(short_row.ok());
  EXPECT_NE(short_row.status().message().find("block 1 has 2 expert loads, expected 8"), std::string::npos);
  auto negative = block_balanced_placement({{1.0, -1.0}}, {0}, 2);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("block 0"), std::string::npos);
}

}  // namespace
}  // namespace sy
