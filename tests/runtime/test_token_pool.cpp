// The token pool on its own: a residual leaves only when every top-k slot of every row is
// back, whatever order and grouping the expert outputs arrive in, with each output in its slot.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "engine/runtime/token_pool.h"

namespace sy {
namespace {

constexpr std::int64_t kWidth = 3;

TokenPacket residual(std::int64_t request, std::int32_t next_block, std::int32_t rows) {
  TokenPacket p;
  p.request = request;
  p.layer = LayerId::attention(next_block, 0);
  p.rows = rows;
  p.hidden.assign(static_cast<std::size_t>(rows * kWidth), 1.0f);
  return p;
}

// An expert packet for block `block - 1`'s experts carrying the given slots; each slot's output
// is filled with a value that encodes (request, slot) so that placement can be checked.
TokenPacket expert_output(std::int64_t request, std::int32_t next_block, const std::vector<std::int32_t>& slots) {
  TokenPacket p;
  p.request = request;
  p.layer = LayerId::attention(next_block, 0);
  p.rows = static_cast<std::int32_t>(slots.size());
  p.slots = slots;
  for (std::int32_t s : slots)
    for (std::int64_t c = 0; c < kWidth; ++c) p.hidden.push_back(static_cast<float>(request * 1000 + s * 10 + c));
  return p;
}

TEST(TokenPool, ReleasesOnlyWhenEverySlotOfEveryRowIsBack) {
  TokenPool pool;
  pool.hold(residual(7, 2, 2), /*k=*/2, kWidth, {});
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_FALSE(pool.absorb(expert_output(7, 2, {0, 3})).has_value());
  EXPECT_FALSE(pool.absorb(expert_output(7, 2, {2})).has_value());
  auto done = pool.absorb(expert_output(7, 2, {1}));
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(pool.empty());
  EXPECT_EQ(done->residual.request, 7);
  EXPECT_EQ(done->residual.rows, 2);
  ASSERT_EQ(done->slot_outputs.size(), static_cast<std::size_t>(4 * kWidth));
  for (std::int32_t s = 0; s < 4; ++s)
    for (std::int64_t c = 0; c < kWidth; ++c)
      EXPECT_EQ(done->slot_outputs[static_cast<std::size_t>(s * kWidth + c)], static_cast<float>(7000 + s * 10 + c));
}

TEST(TokenPool, KeepsTheSharedExpertOutputWithTheEntry) {
  TokenPool pool;
  pool.hold(residual(1, 1, 1), 1, kWidth, {0.5f, 0.25f, 0.125f});
  auto done = pool.absorb(expert_output(1, 1, {0}));
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->shared_out, (std::vector<float>{0.5f, 0.25f, 0.125f}));
}

TEST(TokenPool, InterleavedRequestsAndBlocksInRandomOrder) {
  // 20 requests, each with entries for two blocks in flight (a request's prefill and decode
  // batches may overlap only across blocks), top-4, outputs split into random packets and
  // delivered in a random global order.
  constexpr std::int32_t K = 4;
  std::mt19937_64 rng(3);
  TokenPool pool;
  std::vector<TokenPacket> deliveries;
  std::map<std::pair<std::int64_t, std::int32_t>, std::int32_t> rows_of;
  for (std::int64_t r = 0; r < 20; ++r) {
    for (std::int32_t block : {1, 3}) {
      const auto rows = static_cast<std::int32_t>(1 + rng() % 5);
      rows_of[{r, block}] = rows;
      pool.hold(residual(r, block, rows), K, kWidth, {});
      std::vector<std::int32_t> slots(static_cast<std::size_t>(rows * K));
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      for (std::size_t i = 0; i < slots.size();) {
        const std::size_t n = std::min<std::size_t>(1 + rng() % 3, slots.size() - i);
        deliveries.push_back(expert_output(r, block, {slots.begin() + static_cast<std::ptrdiff_t>(i),
                                                      slots.begin() + static_cast<std::ptrdiff_t>(i + n)}));
        i += n;
      }
    }
  }
  std::shuffle(deliveries.begin(), deliveries.end(), rng);
  std::map<std::pair<std::int64_t, std::int32_t>, std::size_t> remaining;
  for (const auto& [key, rows] : rows_of) remaining[key] = static_cast<std::size_t>(rows * K);
  std::size_t released = 0;
  for (const TokenPacket& d : deliveries) {
    const std::pair<std::int64_t, std::int32_t> key{d.request, d.layer.block};
    remaining[key] -= d.slots.size();
    auto done = pool.absorb(d);
    ASSERT_EQ(done.has_value(), remaining[key] == 0) << "request " << d.request << " block " << d.layer.block;
    if (!done) continue;
    ++released;
    EXPECT_EQ(done->residual.layer.block, key.second);
    for (std::int32_t s = 0; s < rows_of[key] * K; ++s)
      EXPECT_EQ(done->slot_outputs[static_cast<std::size_t>(s * kWidth)], static_cast<float>(d.request * 1000 + s * 10));
  }
  EXPECT_EQ(released, rows_of.size());
  EXPECT_TRUE(pool.empty());
}

TEST(TokenPool, WithoutTensorsCountsRowsOnly) {
  // The sim backend moves no activations: the pool must still release on the last slot.
  TokenPool pool;
  TokenPacket r = residual(4, 1, 3);
  r.hidden.clear();
  pool.hold(std::move(r), 2, 0, {});
  TokenPacket a = expert_output(4, 1, {0, 1, 2}), b = expert_output(4, 1, {3, 4, 5});
  a.hidden.clear();
  b.hidden.clear();
  EXPECT_FALSE(pool.absorb(a).has_value());
  EXPECT_TRUE(pool.absorb(b).has_value());
}

}  // namespace
}  // namespace sy
