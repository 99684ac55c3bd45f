// Which ranks move rows between their GPUs over NCCL, and the one order in which every rank
// joins those links: pure functions of every rank's GPU identity, no GPU needed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/dist/device_link_plan.h"

namespace sy::dist {
namespace {

TEST(DeviceLinkPlan, RanksOnDifferentGpusAreLinkedBothWays) {
  const std::vector<std::string> m = {"GPU-a", "GPU-b"};
  EXPECT_TRUE(device_linked(m, 0, 1));
  EXPECT_TRUE(device_linked(m, 1, 0));
  EXPECT_EQ(device_link_pairs(m), (std::vector<DeviceLinkPair>{{0, 1}, {1, 0}}));
}

TEST(DeviceLinkPlan, RanksSharingAGpuStayHostStaged) {
  // NCCL refuses two ranks of a communicator on one device: ranks 0 and 2 share GPU a.
  const std::vector<std::string> m = {"GPU-a", "GPU-b", "GPU-a"};
  EXPECT_FALSE(device_linked(m, 0, 2));
  EXPECT_FALSE(device_linked(m, 2, 0));
  EXPECT_TRUE(device_linked(m, 2, 1));
  EXPECT_EQ(device_link_pairs(m), (std::vector<DeviceLinkPair>{{0, 1}, {1, 0}, {1, 2}, {2, 1}}));
}

TEST(DeviceLinkPlan, ARankWithoutADeviceMemoryIsLinkedToNone) {
  // An empty identity: a rank without devices, or whose GPU CUDA could not name.
  const std::vector<std::string> m = {"GPU-a", "", "GPU-c"};
  EXPECT_FALSE(device_linked(m, 0, 1));
  EXPECT_FALSE(device_linked(m, 1, 2));
  EXPECT_EQ(device_link_pairs(m), (std::vector<DeviceLinkPair>{{0, 2}, {2, 0}}));
  EXPECT_TRUE(device_link_pairs({"", ""}).empty());
  EXPECT_TRUE(device_link_pairs({"GPU-a", "GPU-a", "GPU-a"}).empty());
}

TEST(DeviceLinkPlan, NoLinkToItselfOrOutsideTheWorld) {
  const std::vector<std::string> m = {"GPU-a", "GPU-b"};
  EXPECT_FALSE(device_linked(m, 0, 0));
  EXPECT_FALSE(device_linked(m, 0, 2));
  EXPECT_FALSE(device_linked(m, -1, 1));
}

TEST(DeviceLinkPlan, EveryRankSeesItsPairsInOneGlobalOrder) {
  // Each rank joins the pairs it is in, in the order of the whole list: for any two ranks, the
  // pairs they share appear in the same relative order in both ranks' sequences.
  const std::vector<std::string> m = {"GPU-a", "GPU-b", "GPU-c", "GPU-d"};
  const std::vector<DeviceLinkPair> all = device_link_pairs(m);
  ASSERT_EQ(all.size(), 12u);
  for (std::size_t i = 1; i < all.size(); ++i)
    EXPECT_TRUE(all[i - 1].from < all[i].from || (all[i - 1].from == all[i].from && all[i - 1].to < all[i].to));
}

}  // namespace
}  // namespace sy::dist
