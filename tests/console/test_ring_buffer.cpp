#include <gtest/gtest.h>

#include <algorithm>

#include "console/model/ring_buffer.h"

namespace sy::console {
namespace {

TEST(RingBuffer, KeepsTheNewestAndCountsOverwrites) {
  RingBuffer<int> r(4);
  for (int i = 0; i < 10; ++i) r.push_back(i);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r.front(), 6);
  EXPECT_EQ(r.back(), 9);
  EXPECT_EQ(r.overwritten(), 6u);
  for (std::size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i], static_cast<int>(6 + i));
}

TEST(RingBuffer, PopFrontAcrossTheWrap) {
  RingBuffer<int> r(5);
  for (int i = 0; i < 7; ++i) r.push_back(i);  // holds 2..6, head wrapped
  r.pop_front(2);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r.front(), 4);
  r.push_back(7);
  r.push_back(8);
  EXPECT_EQ(r.size(), 5u);
  EXPECT_EQ(r.front(), 4);
  EXPECT_EQ(r.back(), 8);
  r.pop_front(99);
  EXPECT_TRUE(r.empty());
  r.push_back(1);
  EXPECT_EQ(r.front(), 1);
}

TEST(RingBuffer, IteratorsSupportBinarySearchOverWrappedContents) {
  RingBuffer<int> r(8);
  for (int i = 0; i < 13; ++i) r.push_back(i * 10);  // 50..120, wrapped
  auto it = std::lower_bound(r.begin(), r.end(), 75);
  ASSERT_NE(it, r.end());
  EXPECT_EQ(*it, 80);
  EXPECT_EQ(it - r.begin(), 3);
  EXPECT_EQ(std::upper_bound(r.begin(), r.end(), 120), r.end());
  EXPECT_EQ(std::lower_bound(r.begin(), r.end(), 0), r.begin());
  EXPECT_EQ(std::count_if(r.begin(), r.end(), [](int v) { return v % 20 == 0; }), 4);
}

TEST(RingBuffer, ZeroCapacityHoldsOne) {
  RingBuffer<int> r(0);
  r.push_back(3);
  r.push_back(4);
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(r.back(), 4);
}

}  // namespace
}  // namespace sy::console
