// The token pool on its own: a request's residual rows leave only when every top-k slot of
// every row is back, whatever order and grouping the expert outputs arrive in, with each output
// in its slot, and with the request's own slice of the residual and shared-expert output.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "engine/runtime/token_pool.h"

namespace sy {
namespace {

constexpr std::int64_t kWidth = 3;

// A residual batch for block `next_block` holding `rows[i]` rows of request `requests[i]`; the
// hidden value of each row encodes (request, row) so that slicing can be checked.
TokenBatch residual(const std::vector<std::int64_t>& requests, const std::vector<std::int32_t>& rows,
                    std::int32_t next_block) {
  TokenBatch b;
  b.layer = LayerId::attention(next_block, 0);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    for (std::int32_t r = 0; r < rows[i]; ++r) {
      b.request.push_back(requests[i]);
      b.position.push_back(10 + r);
      b.rank.push_back(0);
      for (std::int64_t c = 0; c < kWidth; ++c) b.hidden.push_back(static_cast<float>(requests[i] * 100 + r));
    }
  }
  return b;
}

// Expert output rows of `request` carrying the given slots; each slot's output encodes
// (request, slot) so that placement can be checked.
TokenBatch expert_output(std::int64_t request, const std::vector<std::int32_t>& slots) {
  TokenBatch b;
  b.layer = LayerId::attention(1, 0);
  for (std::int32_t s : slots) {
    b.request.push_back(request);
    b.position.push_back(0);
    b.rank.push_back(0);
    b.slot.push_back(s);
    b.weight.push_back(1.0f);
    for (std::int64_t c = 0; c < kWidth; ++c) b.hidden.push_back(static_cast<float>(request * 1000 + s * 10 + c));
  }
  return b;
}

TEST(TokenPool, ReleasesOnlyWhenEverySlotOfEveryRowIsBack) {
  TokenPool pool;
  pool.hold(residual({7}, {2}, 2), /*k=*/2, kWidth, {});
  EXPECT_EQ(pool.size(), 1u);
  std::vector<TokenPool::Completed> done;
  pool.absorb(expert_output(7, {0, 3}), done);
  pool.absorb(expert_output(7, {2}), done);
  EXPECT_TRUE(done.empty());
  pool.absorb(expert_output(7, {1}), done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(pool.empty());
  const TokenPool::Completed& c = done[0];
  EXPECT_EQ(c.request, 7);
  EXPECT_EQ(c.rows, 2);
  EXPECT_EQ(c.first_position, 10);
  EXPECT_EQ(c.layer, LayerId::attention(2, 0));
  EXPECT_EQ(c.hidden, (std::vector<float>{700, 700, 700, 701, 701, 701}));
  ASSERT_EQ(c.slot_outputs.size(), static_cast<std::size_t>(4 * kWidth));
  for (std::int32_t s = 0; s < 4; ++s)
    for (std::int64_t col = 0; col < kWidth; ++col)
      EXPECT_EQ(c.slot_outputs[static_cast<std::size_t>(s * kWidth + col)], static_cast<float>(7000 + s * 10 + col));
}

TEST(TokenPool, GivesEachRequestItsSliceOfTheSharedExpertOutput) {
  TokenPool pool;
  // Two requests of one and two rows; shared output rows are 0.5, 1.5, 2.5.
  std::vector<float> shared;
  for (float v : {0.5f, 1.5f, 2.5f})
    for (std::int64_t c = 0; c < kWidth; ++c) shared.push_back(v);
  pool.hold(residual({1, 2}, {1, 2}, 1), 1, kWidth, std::move(shared));
  std::vector<TokenPool::Completed> done;
  pool.absorb(expert_output(2, {0, 1}), done);
  pool.absorb(expert_output(1, {0}), done);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].request, 2);
  EXPECT_EQ(done[0].shared_out, (std::vector<float>{1.5f, 1.5f, 1.5f, 2.5f, 2.5f, 2.5f}));
  EXPECT_EQ(done[1].request, 1);
  EXPECT_EQ(done[1].shared_out, (std::vector<float>{0.5f, 0.5f, 0.5f}));
}

TEST(TokenPool, ManyRequestsPerBatchWithOutputsInRandomOrder) {
  // 40 requests held in four residual batches, top-4, outputs split into random batches that
  // mix requests, delivered in a random global order.
  constexpr std::int32_t K = 4;
  std::mt19937_64 rng(3);
  TokenPool pool;
  std::map<std::int64_t, std::int32_t> rows_of;
  std::vector<std::pair<std::int64_t, std::int32_t>> outputs;  // (request, slot)
  for (std::int32_t batch = 0; batch < 4; ++batch) {
    std::vector<std::int64_t> requests;
    std::vector<std::int32_t> rows;
    for (std::int64_t r = batch * 10; r < batch * 10 + 10; ++r) {
      requests.push_back(r);
      rows.push_back(static_cast<std::int32_t>(1 + rng() % 5));
      rows_of[r] = rows.back();
      for (std::int32_t s = 0; s < rows.back() * K; ++s) outputs.emplace_back(r, s);
    }
    pool.hold(residual(requests, rows, 3), K, kWidth, {});
  }
  EXPECT_EQ(pool.size(), 40u);
  std::shuffle(outputs.begin(), outputs.end(), rng);
  std::map<std::int64_t, std::size_t> remaining;
  for (const auto& [request, rows] : rows_of) remaining[request] = static_cast<std::size_t>(rows * K);
  std::vector<TokenPool::Completed> done;
  for (std::size_t i = 0; i < outputs.size();) {
    const std::size_t n = std::min<std::size_t>(1 + rng() % 7, outputs.size() - i);
    TokenBatch delivery;
    for (std::size_t j = i; j < i + n; ++j) {
      TokenBatch one = expert_output(outputs[j].first, {outputs[j].second});
      delivery.append(std::move(one));
    }
    std::set<std::int64_t> expect_released;
    for (std::size_t j = i; j < i + n; ++j)
      if (--remaining[outputs[j].first] == 0) expect_released.insert(outputs[j].first);
    done.clear();
    pool.absorb(delivery, done);
    std::set<std::int64_t> released;
    for (const auto& c : done) {
      released.insert(c.request);
      for (std::int32_t s = 0; s < rows_of[c.request] * K; ++s)
        EXPECT_EQ(c.slot_outputs[static_cast<std::size_t>(s * kWidth)], static_cast<float>(c.request * 1000 + s * 10));
      EXPECT_EQ(c.hidden.size(), static_cast<std::size_t>(rows_of[c.request] * kWidth));
    }
    EXPECT_EQ(released, expect_released);
    i += n;
  }
  EXPECT_TRUE(pool.empty());
}

TEST(TokenPool, WithoutTensorsCountsRowsOnly) {
  // The sim backend moves no activations: the pool must still release on the last slot.
  TokenPool pool;
  TokenBatch r = residual({4}, {3}, 1);
  r.hidden.clear();
  pool.hold(std::move(r), 2, 0, {});
  TokenBatch a = expert_output(4, {0, 1, 2}), b = expert_output(4, {3, 4, 5});
  a.hidden.clear();
  b.hidden.clear();
  std::vector<TokenPool::Completed> done;
  pool.absorb(a, done);
  EXPECT_TRUE(done.empty());
  pool.absorb(b, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].hidden.empty());
  EXPECT_EQ(done[0].rows, 3);
}

TEST(TokenPool, ReusesReleasedEntries) {
  // A long run holds and releases millions of entries: the pool's storage must not grow with them.
  TokenPool pool;
  std::vector<TokenPool::Completed> done;
  for (std::int64_t r = 0; r < 1000; ++r) {
    TokenBatch res = residual({r}, {1}, 1);
    res.hidden.clear();
    pool.hold(std::move(res), 1, 0, {});
    TokenBatch out = expert_output(r, {0});
    out.hidden.clear();
    pool.absorb(out, done);
  }
  EXPECT_EQ(done.size(), 1000u);
  EXPECT_TRUE(pool.empty());
  EXPECT_EQ(pool.capacity(), 1u);
}

}  // namespace
}  // namespace sy
