// The memory accounting of placement that moves weights: which copies a placement change
// needs, from where, and when a device has no room for them.
#include <gtest/gtest.h>

#include "engine/runtime/expert_residency.h"

namespace sy {
namespace {

// Two sparse blocks of four experts on four devices; expert e on device e.
Placement one_per_device() {
  Placement p(2, 4, {true, true});
  for (std::int32_t b = 0; b < 2; ++b)
    for (std::int32_t e = 0; e < 4; ++e) EXPECT_TRUE(p.set(b, e, {e}).ok());
  return p;
}

ExpertResidency resident(const Placement& p, std::vector<std::int64_t> capacity, std::int32_t per_node = 0) {
  ExpertResidency r(4, 100, std::move(capacity), {0, 0, 50, 0}, per_node);
  for (std::int32_t d = 0; d < 4; ++d)
    for (const BlockExpert& be : p.experts_on(d)) r.load(be.block, be.expert, d);
  return r;
}

const std::vector<std::string> kNames = {"a", "b", "c", "d"};

TEST(ExpertResidency, AMoveCopiesFromTheDeviceThatHoldsTheExpert) {
  const Placement start = one_per_device();
  ExpertResidency r = resident(start, {});
  EXPECT_EQ(r.used_bytes(2), 50 + 2 * 100);  // its KV storage and two experts
  Placement moved = start;
  ASSERT_TRUE(moved.set(1, 1, {3}).ok());
  auto copies = r.plan(moved, kNames);
  ASSERT_TRUE(copies.ok()) << copies.status().message();
  ASSERT_EQ(copies->size(), 1u);
  const WeightCopy& c = copies->front();
  EXPECT_EQ(std::tie(c.block, c.expert, c.source, c.target, c.bytes), std::make_tuple(1, 1, 1, 3, 100));
  // Arriving copies count against the target at once and are not planned twice.
  r.begin(c);
  EXPECT_EQ(r.used_bytes(3), 300);
  EXPECT_TRUE(r.arriving(1, 1, 3));
  EXPECT_TRUE(r.plan(moved, kNames)->empty());
  r.arrived(c);
  EXPECT_TRUE(r.resident(1, 1, 3));
  EXPECT_FALSE(r.arriving(1, 1, 3));
  // After the switch the source's copy is surplus, unless a placement still staged wants it.
  EXPECT_EQ(r.surplus(1, moved, nullptr), (std::vector<BlockExpert>{{1, 1}}));
  EXPECT_TRUE(r.surplus(1, moved, &start).empty());
  EXPECT_TRUE(r.surplus(3, moved, nullptr).empty());
}

TEST(ExpertResidency, CopiesPreferASourceOnTheTargetsNode) {
  Placement start = one_per_device();
  ASSERT_TRUE(start.set(0, 0, {0, 2}).ok());  // nodes of two: {0, 1} and {2, 3}
  ExpertResidency r = resident(start, {}, 2);
  Placement more = start;
  ASSERT_TRUE(more.set(0, 0, {0, 2, 3}).ok());
  ASSERT_TRUE(more.set(1, 2, {1, 2}).ok());
  auto copies = r.plan(more, kNames);
  ASSERT_TRUE(copies.ok());
  ASSERT_EQ(copies->size(), 2u);
  EXPECT_EQ((*copies)[0].source, 2) << "device 3 copies from device 2 on its node, not device 0";
  EXPECT_EQ((*copies)[1].source, 2) << "only device 2 holds it";
  // Nothing holds it anywhere (e.g. only another process did): from the host.
  r.drop(0, 0, 0);
  r.drop(0, 0, 2);
  EXPECT_EQ(r.plan(more, kNames)->front().source, -1);
}

TEST(ExpertResidency, ACopyThatDoesNotFitIsRefusedNamingTheDeviceAndTheBytes) {
  const Placement start = one_per_device();
  // Device 3 holds two experts (200 bytes) of 350: one more fits, two do not.
  ExpertResidency r = resident(start, {0, 0, 0, 350});
  Placement one = start;
  ASSERT_TRUE(one.set(0, 0, {0, 3}).ok());
  EXPECT_TRUE(r.plan(one, kNames).ok());
  Placement two = one;
  ASSERT_TRUE(two.set(1, 0, {0, 3}).ok());
  auto refused = r.plan(two, kNames);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "device 3 (d) has no room for the weights: 2 experts need 200 bytes, 150 of its 350 bytes are free");
  // Devices of unknown memory (capacity 0) take anything.
  Placement everywhere = start;
  for (std::int32_t e = 0; e < 4; ++e) ASSERT_TRUE(everywhere.set(0, e, {0, 1, 2}).ok());
  EXPECT_TRUE(r.plan(everywhere, kNames).ok());
}

}  // namespace
}  // namespace sy
