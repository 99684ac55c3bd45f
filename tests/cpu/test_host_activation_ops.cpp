// The cpu backend's activation operations against a naive model of each handle as a vector of
// rows: gather, append and scatter must move exactly the rows the naive copies move, and the
// device's pool must hand buffers out again instead of allocating in steady state.
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "engine/cpu/host_activation_ops.h"

namespace sy {
namespace {

using Rows = std::vector<std::vector<float>>;

// A handle of `rows` rows of `width` random values, and the same values as the naive model.
Activations random_rows(HostActivationOps& ops, std::int64_t rows, std::int64_t width, std::mt19937& rng, Rows& model) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  Activations a = ops.allocate(rows, width);
  model.assign(static_cast<std::size_t>(rows), std::vector<float>(static_cast<std::size_t>(width)));
  float* d = HostActivationOps::data(a);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < width; ++c) d[r * width + c] = model[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)] = value(rng);
  return a;
}

Rows contents(const Activations& a) {
  Rows out(static_cast<std::size_t>(a.rows()), std::vector<float>(static_cast<std::size_t>(a.width())));
  const float* d = HostActivationOps::data(a);
  for (std::int64_t r = 0; r < a.rows(); ++r)
    for (std::int64_t c = 0; c < a.width(); ++c) out[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)] = d[r * a.width() + c];
  return out;
}

TEST(HostActivationOps, GatherTakesTheListedRowsOfSeveralSourcesInOrder) {
  constexpr std::int64_t W = 13;
  std::mt19937 rng(1);
  HostActivationOps ops;
  std::vector<Rows> model(3);
  std::vector<Activations> sources;
  for (std::size_t s = 0; s < 3; ++s) sources.push_back(random_rows(ops, 5 + 7 * static_cast<std::int64_t>(s), W, rng, model[s]));
  for (int trial = 0; trial < 50; ++trial) {
    // Random rows with runs of consecutive rows of one source mixed in (copied as one run).
    std::vector<SourceRow> from;
    Rows expect;
    const int n = 1 + static_cast<int>(rng() % 40);
    while (static_cast<int>(from.size()) < n) {
      const std::size_t s = rng() % 3;
      const std::int64_t rows = sources[s].rows();
      std::int64_t r = static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(rows));
      const std::int64_t run = 1 + static_cast<std::int64_t>(rng() % 4);
      for (std::int64_t i = 0; i < run && r < rows; ++i, ++r) {
        from.push_back({&sources[s], r});
        expect.push_back(model[s][static_cast<std::size_t>(r)]);
      }
    }
    Activations dst;
    if (trial % 2 == 1) dst = ops.allocate(static_cast<std::int64_t>(rng() % 64), W);  // refilled or replaced
    ops.gather(from, dst);
    EXPECT_EQ(dst.rows(), static_cast<std::int64_t>(from.size()));
    EXPECT_EQ(dst.width(), W);
    EXPECT_EQ(contents(dst), expect) << "trial " << trial;
  }
}

TEST(HostActivationOps, AppendConcatenatesAndANullDestinationTakesTheStorage) {
  constexpr std::int64_t W = 5;
  std::mt19937 rng(2);
  HostActivationOps ops;
  Rows model, part;
  Activations dst;
  Activations first = random_rows(ops, 3, W, rng, part);
  const float* storage = HostActivationOps::data(first);
  ops.append(dst, std::move(first));
  EXPECT_TRUE(first.null());
  EXPECT_EQ(HostActivationOps::data(dst), storage) << "a null destination takes the rows without a copy";
  model = part;
  // Growing one batch by many small arrivals, past several of the pool's size classes.
  for (int i = 0; i < 60; ++i) {
    Activations more = random_rows(ops, 1 + static_cast<std::int64_t>(rng() % 9), W, rng, part);
    ops.append(dst, std::move(more));
    EXPECT_TRUE(more.null());
    model.insert(model.end(), part.begin(), part.end());
    ASSERT_EQ(contents(dst), model) << "after append " << i;
  }
  Activations none;
  ops.append(dst, std::move(none));
  EXPECT_EQ(contents(dst), model);
}

TEST(HostActivationOps, ScatterPutsEachRowWhereItsTargetSays) {
  constexpr std::int64_t W = 7;
  std::mt19937 rng(3);
  HostActivationOps ops;
  // Three slot stores (one per request) of different sizes, filled by two scatters in a random
  // order, like expert outputs arriving at the token pool.
  std::vector<Rows> model(3);
  std::vector<Activations> stores;
  std::vector<std::pair<std::size_t, std::int64_t>> slots;
  for (std::size_t s = 0; s < 3; ++s) {
    stores.push_back(random_rows(ops, 4 + static_cast<std::int64_t>(s) * 3, W, rng, model[s]));
    for (std::int64_t r = 0; r < stores[s].rows(); ++r) slots.emplace_back(s, r);
  }
  std::shuffle(slots.begin(), slots.end(), rng);
  const std::size_t half = slots.size() / 2;
  for (auto [begin, end] : {std::pair{std::size_t{0}, half}, std::pair{half, slots.size()}}) {
    Rows rows;
    Activations src = random_rows(ops, static_cast<std::int64_t>(end - begin), W, rng, rows);
    std::vector<TargetRow> to;
    for (std::size_t i = begin; i < end; ++i) {
      to.push_back({&stores[slots[i].first], slots[i].second});
      model[slots[i].first][static_cast<std::size_t>(slots[i].second)] = rows[i - begin];
    }
    ops.scatter(src, to);
  }
  for (std::size_t s = 0; s < 3; ++s) EXPECT_EQ(contents(stores[s]), model[s]) << "store " << s;
}

TEST(HostActivationOps, StorageGivenBackIsHandedOutAgain) {
  HostActivationOps ops;
  const float* first;
  {
    Activations a = ops.allocate(16, 64);
    first = HostActivationOps::data(a);
  }
  EXPECT_EQ(ops.pool().spare(), 1);
  // A steady stream of batches of varying size within one class: no new buffers.
  const std::int64_t before = ops.pool().heap_allocations();
  for (std::int64_t rows = 9; rows <= 16; ++rows) {
    Activations a = ops.allocate(rows, 64);
    EXPECT_EQ(HostActivationOps::data(a), first);
  }
  EXPECT_EQ(ops.pool().heap_allocations(), before);
  // Moving a handle moves ownership: one buffer, given back once.
  Activations a = ops.allocate(12, 64);
  Activations b = std::move(a);
  EXPECT_TRUE(a.null());
  EXPECT_EQ(ops.pool().spare(), 0);
  b = Activations{};
  EXPECT_EQ(ops.pool().spare(), 1);
  // A larger class needs a buffer of its own, once.
  { Activations big = ops.allocate(100, 64); }
  { Activations big = ops.allocate(120, 64); }
  EXPECT_EQ(ops.pool().heap_allocations(), before + 1);
  EXPECT_EQ(ops.pool().spare(), 2);
}

TEST(HostActivationOps, PoolTakesAllocationsAndReturnsFromTwoThreads) {
  // On the wall clock a device's thread allocates outputs and drops inputs while the event
  // loop's thread gathers and drops batches: the pool must come out consistent.
  HostActivationOps ops;
  auto churn = [&ops](unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<Activations> held;
    for (int i = 0; i < 20000; ++i) {
      if (held.size() < 8 && rng() % 2 == 0) {
        held.push_back(ops.allocate(17 + static_cast<std::int64_t>(rng() % 16), 16));  // one size class
        HostActivationOps::data(held.back())[0] = 1.0f;
      } else if (!held.empty()) {
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(rng() % held.size()));
      }
    }
  };
  std::thread device(churn, 1u);
  churn(2u);
  device.join();
  // Every buffer came back, and neither thread held more than 8 at a time.
  EXPECT_EQ(ops.pool().spare(), ops.pool().heap_allocations());
  EXPECT_LE(ops.pool().heap_allocations(), 16);
}

}  // namespace
}  // namespace sy
