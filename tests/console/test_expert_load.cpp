#include <gtest/gtest.h>

#include "console/model/expert_load_store.h"
#include "console/model/skew_analysis.h"

namespace sy::console {
namespace {

telemetry::ExpertLoad load(std::int64_t w0, std::int64_t w1, std::int32_t block, std::int32_t expert,
                           std::int32_t device, std::int64_t tokens) {
  telemetry::ExpertLoad l;
  l.window_start_ns = w0;
  l.window_end_ns = w1;
  l.block = block;
  l.expert = expert;
  l.device = device;
  l.tokens = tokens;
  return l;
}

TEST(ExpertLoadStore, GroupsRecordsByWindowAndFindsTheWindowAtATime) {
  ExpertLoadStore store(3);
  for (int w = 0; w < 5; ++w)
    for (int e = 0; e < 4; ++e) store.add(load(w * 100, w * 100 + 100, 0, e, 0, 1));
  ASSERT_EQ(store.window_count(), 3u);  // bounded
  EXPECT_EQ(store.latest()->start_ns, 400);
  EXPECT_EQ(store.latest()->records.size(), 4u);
  EXPECT_EQ(store.at(250)->start_ns, 200);
  EXPECT_EQ(store.at(9999)->start_ns, 400);
  EXPECT_EQ(store.at(150), nullptr);  // dropped
  // A late record of a held window joins it.
  store.add(load(300, 400, 1, 0, 0, 1));
  EXPECT_EQ(store.at(350)->records.size(), 5u);
}

TEST(SkewAnalysis, ImbalancePerBlockAndDeviceAndHottestExperts) {
  LoadWindow w{0, 1'000'000'000, {}};
  // Block 0: experts 0..3 with 10, 10, 10, 50 tokens (expert 3 replicated on devices 2 and 3).
  w.records.push_back(load(0, 1, 0, 0, 0, 10));
  w.records.push_back(load(0, 1, 0, 1, 1, 10));
  w.records.push_back(load(0, 1, 0, 2, 2, 10));
  w.records.push_back(load(0, 1, 0, 3, 2, 25));
  w.records.push_back(load(0, 1, 0, 3, 3, 25));
  // Block 1: perfectly even.
  for (int e = 0; e < 4; ++e) w.records.push_back(load(0, 1, 1, e, e, 20));
  RunMeta meta;
  meta.blocks = 2;
  meta.experts = 4;
  meta.placement = {{{0}, {1}, {2}, {2, 3}}, {{0}, {1}, {2}, {3}}};
  for (int d = 0; d < 5; ++d) meta.devices.push_back({d, "d" + std::to_string(d), -1, 0});

  const SkewAnalysis a = analyze_skew(w, &meta, 3);
  EXPECT_EQ(a.blocks, 2);
  EXPECT_EQ(a.experts, 4);
  EXPECT_EQ(a.devices, 5);
  EXPECT_EQ(a.at(0, 3), 50);
  EXPECT_DOUBLE_EQ(a.block_imbalance[0], 50.0 / 20.0);
  EXPECT_DOUBLE_EQ(a.block_imbalance[1], 1.0);
  // Device tokens: 30, 30, 55, 45, and device 4 hosts nothing (not in the mean).
  EXPECT_EQ(a.device_tokens[2], 55);
  EXPECT_DOUBLE_EQ(a.device_imbalance, 55.0 / 40.0);
  EXPECT_EQ(a.total_tokens, 160);
  ASSERT_EQ(a.hottest.size(), 3u);
  EXPECT_EQ(a.hottest[0].block, 0);
  EXPECT_EQ(a.hottest[0].expert, 3);
  EXPECT_EQ(a.hottest[0].devices, (std::vector<std::int32_t>{2, 3}));
  EXPECT_DOUBLE_EQ(a.hottest[0].vs_block_mean, 2.5);
  EXPECT_EQ(a.hottest[1].tokens, 20);
}

TEST(SkewAnalysis, WithoutMetadataDimensionsComeFromTheRecords) {
  LoadWindow w{0, 1, {load(0, 1, 2, 5, 7, 3)}};
  const SkewAnalysis a = analyze_skew(w, nullptr);
  EXPECT_EQ(a.blocks, 3);
  EXPECT_EQ(a.experts, 6);
  EXPECT_EQ(a.devices, 8);
  EXPECT_EQ(a.at(2, 5), 3);
  EXPECT_DOUBLE_EQ(a.device_imbalance, 1.0);
}

}  // namespace
}  // namespace sy::console
