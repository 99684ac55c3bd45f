#include <gtest/gtest.h>

#include "console/model/queue_store.h"

namespace sy::console {
namespace {

using telemetry::LayerKind;
using telemetry::QueueSample;

QueueSample sample(std::int32_t device, LayerKind layer, std::int32_t block, std::int32_t index, std::int64_t t,
                   std::int64_t depth) {
  QueueSample q;
  q.device = device;
  q.layer = layer;
  q.block = block;
  q.index = index;
  q.t_ns = t;
  q.depth_tokens = depth;
  return q;
}

TEST(QueueStore, DepthIsAStepFunction) {
  QueueStore store;
  const QueueKey key{1, LayerKind::Expert, 3, 2};
  store.add(sample(1, LayerKind::Expert, 3, 2, 100, 5));
  store.add(sample(1, LayerKind::Expert, 3, 2, 200, 0));
  store.add(sample(1, LayerKind::Expert, 3, 2, 300, 8));
  EXPECT_EQ(store.depth_at(key, 50), 0);
  EXPECT_EQ(store.depth_at(key, 100), 5);
  EXPECT_EQ(store.depth_at(key, 199), 5);
  EXPECT_EQ(store.depth_at(key, 250), 0);
  EXPECT_EQ(store.depth_at(key, 1000), 8);
  EXPECT_FALSE(store.add(sample(1, LayerKind::Expert, 3, 2, 250, 1)));  // out of order
  EXPECT_EQ(store.out_of_order(), 1u);
  EXPECT_EQ(store.max_depth_seen(), 8);
}

TEST(QueueStore, MeanBinsAreTimeWeighted) {
  QueueStore store;
  const QueueKey key{0, LayerKind::Attention, 0, 0};
  store.add(sample(0, LayerKind::Attention, 0, 0, 0, 10));
  store.add(sample(0, LayerKind::Attention, 0, 0, 150, 20));
  store.add(sample(0, LayerKind::Attention, 0, 0, 300, 0));
  std::vector<double> bins(4, 0.0);  // [0,100) [100,200) [200,300) [300,400)
  store.accumulate_bins(key, 0, 400, BinMode::Mean, bins);
  EXPECT_DOUBLE_EQ(bins[0], 10.0);
  EXPECT_DOUBLE_EQ(bins[1], 15.0);  // half at 10, half at 20
  EXPECT_DOUBLE_EQ(bins[2], 20.0);
  EXPECT_DOUBLE_EQ(bins[3], 0.0);

  std::vector<double> peaks(4, 0.0);
  store.accumulate_bins(key, 0, 400, BinMode::Max, peaks);
  EXPECT_DOUBLE_EQ(peaks[1], 20.0);
  EXPECT_DOUBLE_EQ(peaks[3], 0.0);

  // The value before the window carries into it; accumulating adds.
  store.accumulate_bins(key, 200, 400, BinMode::Mean, bins);
  EXPECT_DOUBLE_EQ(bins[0], 30.0);
}

TEST(QueueStore, RowsGroupQueuesByDeviceAndBlock) {
  QueueStore store;
  store.add(sample(0, LayerKind::Attention, 0, 0, 0, 1));
  store.add(sample(0, LayerKind::Attention, 1, 0, 0, 1));
  store.add(sample(1, LayerKind::Expert, 0, 0, 0, 1));
  store.add(sample(1, LayerKind::Expert, 0, 1, 0, 1));
  store.add(sample(1, LayerKind::Expert, 1, 0, 0, 1));
  EXPECT_EQ(store.rows(QueueGrouping::EachQueue).size(), 5u);
  const auto by_block = store.rows(QueueGrouping::DeviceBlock);
  ASSERT_EQ(by_block.size(), 4u);
  EXPECT_EQ(by_block[2].members.size(), 2u);
  const auto by_device = store.rows(QueueGrouping::Device);
  ASSERT_EQ(by_device.size(), 2u);
  EXPECT_EQ(by_device[1].members.size(), 3u);
}

TEST(QueueStore, RingBufferBoundsEachQueueAndTrimKeepsTheValueAtTheCutoff) {
  QueueStore store(16);
  const QueueKey key{0, LayerKind::Expert, 0, 0};
  for (int i = 0; i < 100; ++i) store.add(sample(0, LayerKind::Expert, 0, 0, i * 10, i));
  ASSERT_EQ(store.series(key)->size(), 16u);
  EXPECT_EQ(store.series(key)->front().t_ns, 840);
  store.trim(905);
  EXPECT_EQ(store.series(key)->front().t_ns, 900);
  EXPECT_EQ(store.depth_at(key, 905), 90);
}

}  // namespace
}  // namespace sy::console
