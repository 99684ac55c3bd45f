#include "telemetry/spsc_ring.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

namespace sy::telemetry {
namespace {

struct Rec {
  std::uint64_t value = 0;
  std::uint64_t check = 0;  // ~value: a torn copy would break the pair
};

TEST(SpscRing, CapacityRoundsUpToAPowerOfTwo) {
  EXPECT_EQ(SpscRing<Rec>(0).capacity(), 2u);
  EXPECT_EQ(SpscRing<Rec>(5).capacity(), 8u);
  EXPECT_EQ(SpscRing<Rec>(1024).capacity(), 1024u);
}

TEST(SpscRing, PopsInOrderAndDropsWhenFull) {
  SpscRing<Rec> ring(4);
  for (std::uint64_t i = 0; i < 4; ++i) EXPECT_TRUE(ring.push({i, ~i}));
  EXPECT_FALSE(ring.push({99, ~99ull}));
  EXPECT_FALSE(ring.push({100, ~100ull}));
  EXPECT_EQ(ring.dropped(), 2u);
  EXPECT_EQ(ring.size(), 4u);

  Rec out[8];
  ASSERT_EQ(ring.pop(out, 3), 3u);
  EXPECT_EQ(out[0].value, 0u);
  EXPECT_EQ(out[2].value, 2u);
  // Wraps around the end of the storage.
  EXPECT_TRUE(ring.push({4, ~4ull}));
  EXPECT_TRUE(ring.push({5, ~5ull}));
  ASSERT_EQ(ring.pop(out, 8), 3u);
  EXPECT_EQ(out[0].value, 3u);
  EXPECT_EQ(out[1].value, 4u);
  EXPECT_EQ(out[2].value, 5u);
  EXPECT_EQ(ring.pop(out, 8), 0u);
  EXPECT_EQ(ring.dropped(), 2u);
}

// Producer retries until every record is in: the consumer must see each exactly once, in order, untorn.
TEST(SpscRing, TwoThreadsDeliverEveryRecordInOrder) {
  constexpr std::uint64_t kCount = 2'000'000;
  SpscRing<Rec> ring(1024);
  std::thread producer([&] {
    for (std::uint64_t i = 0; i < kCount; ++i) {
      while (!ring.push({i, ~i})) std::this_thread::yield();
    }
  });
  std::uint64_t expected = 0;
  bool ordered = true;
  std::vector<Rec> buf(300);
  while (expected < kCount) {
    const std::size_t n = ring.pop(buf.data(), buf.size());
    if (n == 0) std::this_thread::yield();
    for (std::size_t i = 0; i < n; ++i) {
      ordered = ordered && buf[i].value == expected && buf[i].check == ~expected;
      ++expected;
    }
  }
  producer.join();
  EXPECT_TRUE(ordered);
  EXPECT_EQ(expected, kCount);
  EXPECT_EQ(ring.size(), 0u);
}

// Producer never waits: what it could not push is counted, and what it pushed arrives in order.
TEST(SpscRing, TwoThreadsWithDropsAccountForEveryRecord) {
  constexpr std::uint64_t kCount = 1'000'000;
  SpscRing<Rec> ring(64);
  std::uint64_t accepted = 0;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (std::uint64_t i = 0; i < kCount; ++i) accepted += ring.push({i, ~i}) ? 1 : 0;
    done = true;
  });
  std::uint64_t received = 0;
  std::uint64_t last = 0;
  bool ordered = true;
  Rec buf[16];
  while (true) {
    const bool finished = done.load();
    const std::size_t n = ring.pop(buf, 16);
    for (std::size_t i = 0; i < n; ++i) {
      ordered = ordered && buf[i].check == ~buf[i].value && (received == 0 || buf[i].value > last);
      last = buf[i].value;
      ++received;
    }
    if (finished && n == 0 && ring.size() == 0) break;
  }
  producer.join();
  EXPECT_TRUE(ordered);
  EXPECT_EQ(received, accepted);
  EXPECT_EQ(accepted + ring.dropped(), kCount);
}

}  // namespace
}  // namespace sy::telemetry
