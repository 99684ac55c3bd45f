// The token pool on its own: a request's residual rows leave only when every top-k slot of
// every row is back, whatever order and grouping the expert outputs arrive in, with each output
// in its slot, and with the request's own slice of the residual and shared-expert output.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "engine/cpu/host_activation_ops.h"
#include "engine/runtime/token_pool.h"

namespace sy {
namespace {

constexpr std::int64_t kWidth = 3;

// The activations of a device with real ones: the host backend's, as on a cpu device.
Activations host_rows(ActivationOps& ops, const std::vector<float>& v) {
  Activations a = ops.allocate(static_cast<std::int64_t>(v.size()) / kWidth, kWidth);
  std::copy(v.begin(), v.end(), HostActivationOps::data(a));
  return a;
}

std::vector<float> values(const Activations& a) {
  const float* d = HostActivationOps::data(a);
  return {d, d + a.rows() * a.width()};
}

// A residual batch for block `next_block` holding `rows[i]` rows of request `requests[i]`; the
// hidden value of each row encodes (request, row) so that slicing can be checked.
TokenBatch residual(ActivationOps& ops, const std::vector<std::int64_t>& requests, const std::vector<std::int32_t>& rows,
                    std::int32_t next_block) {
  TokenBatch b;
  b.layer = LayerId::attention(next_block, 0);
  b.columns = kAttentionColumns;
  std::vector<float> hidden;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    for (std::int32_t r = 0; r < rows[i]; ++r) {
      b.row.push_back({.request = requests[i], .position = 10 + r, .rank = 0});
      // In double: the random-order test's request ids are random 64-bit values (UBSan: the
      // product overflowed int64; only small ids' values are ever compared).
      for (std::int64_t c = 0; c < kWidth; ++c) hidden.push_back(static_cast<float>(static_cast<double>(requests[i]) * 100 + r));
    }
  }
  b.hidden = host_rows(ops, hidden);
  return b;
}

// Expert output rows of `request` carrying the given slots (request and slot per row, as the
// expert dispatch sends them); each slot's output encodes (request, slot) so that placement can
// be checked.
TokenBatch expert_output(ActivationOps& ops, std::int64_t request, const std::vector<std::int32_t>& slots) {
  TokenBatch b;
  b.layer = LayerId::attention(1, 0);
  b.columns = kOutputColumns;
  std::vector<float> hidden;
  for (std::int32_t s : slots) {
    b.row.push_back({.request = request, .slot = s});
    for (std::int64_t c = 0; c < kWidth; ++c) hidden.push_back(static_cast<float>(request * 1000 + s * 10 + c));
  }
  b.hidden = host_rows(ops, hidden);
  return b;
}

// A pool with the entry it gave each request it holds: hold() writes them into the residual's
// rows, and the expert rows dispatched from those carry them to the experts and back in their
// outputs. The outputs made here carry a request and slots: absorb() gives each row its
// request's entry first, as the dispatches copy it (it must be one the pool gave).
struct Pool {
  TokenPool pool;
  std::map<std::int64_t, std::int32_t> entry;

  void hold(TokenBatch residual, std::int32_t k, Activations shared_out, bool shared_to_come = false) {
    pool.hold(residual, k, std::move(shared_out), shared_to_come);
    for (const TokenRow& row : residual.row) entry[row.request] = row.entry;
  }
  void give_entries(TokenBatch& outputs) const {
    outputs.columns |= kColumnEntry;
    for (TokenRow& row : outputs.row) row.entry = entry.at(row.request);
  }
  template <class Done>
  void absorb(TokenBatch&& outputs, Done&& done) {
    absorb(outputs, std::forward<Done>(done));
  }
  template <class Done>
  void absorb(TokenBatch& outputs, Done&& done) {
    give_entries(outputs);
    pool.absorb(outputs, std::forward<Done>(done));
  }
  template <class Done>
  void absorb_shared(TokenBatch&& outputs, Done&& done) {
    give_entries(outputs);
    pool.absorb_shared(outputs, std::forward<Done>(done));
  }
  bool empty() const { return pool.empty(); }
  std::size_t size() const { return pool.size(); }
  std::size_t capacity() const { return pool.capacity(); }
};

TEST(TokenPool, ReleasesOnlyWhenEverySlotOfEveryRowIsBack) {
  HostActivationOps ops;
  Pool pool;
  pool.hold(residual(ops, {7}, {2}, 2), /*k=*/2, {});
  EXPECT_EQ(pool.size(), 1u);
  std::vector<TokenPool::Completed> done;
  pool.absorb(expert_output(ops, 7, {0, 3}), done);
  pool.absorb(expert_output(ops, 7, {2}), done);
  EXPECT_TRUE(done.empty());
  pool.absorb(expert_output(ops, 7, {1}), done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(pool.empty());
  const TokenPool::Completed& c = done[0];
  EXPECT_EQ(c.request, 7);
  EXPECT_EQ(c.rows, 2);
  EXPECT_EQ(c.first_position, 10);
  EXPECT_EQ(c.layer, LayerId::attention(2, 0));
  EXPECT_EQ(values(c.hidden), (std::vector<float>{700, 700, 700, 701, 701, 701}));
  const std::vector<float> slot_outputs = values(c.slot_outputs);
  ASSERT_EQ(slot_outputs.size(), static_cast<std::size_t>(4 * kWidth));
  for (std::int32_t s = 0; s < 4; ++s)
    for (std::int64_t col = 0; col < kWidth; ++col)
      EXPECT_EQ(slot_outputs[static_cast<std::size_t>(s * kWidth + col)], static_cast<float>(7000 + s * 10 + col));
  EXPECT_TRUE(c.shared_out.null());
}

TEST(TokenPool, HandsCompletedRequestsToACallbackInTheOrderOfTheList) {
  // The worker takes each request where it lies in the pool as it completes: the same requests
  // in the same order as the list overload gives them, its activations movable from there, and
  // the entry reused afterwards.
  HostActivationOps ops;
  Pool by_list, by_callback;
  for (Pool* pool : {&by_list, &by_callback}) pool->hold(residual(ops, {4, 9, 6}, {1, 2, 1}, 3), /*k=*/2, {});
  TokenBatch outputs = expert_output(ops, 9, {0, 1, 2});
  const TokenBatch more[] = {expert_output(ops, 6, {1, 0}), expert_output(ops, 4, {0}), expert_output(ops, 9, {3})};
  for (const TokenBatch& m : more) {
    std::vector<std::int32_t> slots;
    for (const TokenRow& row : m.row) {
      outputs.row.push_back(row);
      slots.push_back(row.slot);
    }
    outputs.hidden.owner().append(outputs.hidden, expert_output(ops, m.row[0].request, slots).hidden);
  }
  std::vector<TokenPool::Completed> listed;
  by_list.absorb(outputs, listed);
  std::vector<std::int64_t> order;
  std::vector<std::vector<float>> hidden, slot_outputs;
  by_callback.absorb(outputs, [&](TokenPool::Completed& c) {
    order.push_back(c.request);
    const Activations taken = std::move(c.hidden);
    hidden.push_back(values(taken));
    slot_outputs.push_back(values(c.slot_outputs));
  });
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(order, (std::vector<std::int64_t>{6, 9}));
  for (std::size_t i = 0; i < listed.size(); ++i) {
    EXPECT_EQ(order[i], listed[i].request);
    EXPECT_EQ(hidden[i], values(listed[i].hidden));
    EXPECT_EQ(slot_outputs[i], values(listed[i].slot_outputs));
  }
  EXPECT_EQ(by_callback.size(), 1u);
  // Request 4's last slot; the entries 6 and 9 left are reused by the next hold.
  std::vector<TokenPool::Completed> last;
  by_callback.absorb(expert_output(ops, 4, {1}), last);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].request, 4);
  EXPECT_EQ(values(last[0].hidden), (std::vector<float>{400, 400, 400}));
  by_callback.hold(residual(ops, {11, 12}, {1, 1}, 3), 1, {});
  EXPECT_EQ(by_callback.capacity(), 3u);
  std::vector<std::int64_t> again;
  TokenBatch out11 = expert_output(ops, 11, {0});
  by_callback.absorb(out11, [&](TokenPool::Completed& c) {
    again.push_back(c.request);
    EXPECT_EQ(values(c.hidden), (std::vector<float>{1100, 1100, 1100}));
  });
  EXPECT_EQ(again, (std::vector<std::int64_t>{11}));
}

TEST(TokenPool, GivesEachRequestItsSliceOfTheSharedExpertOutput) {
  HostActivationOps ops;
  Pool pool;
  // Two requests of one and two rows; shared output rows are 0.5, 1.5, 2.5.
  std::vector<float> shared;
  for (float v : {0.5f, 1.5f, 2.5f})
    for (std::int64_t c = 0; c < kWidth; ++c) shared.push_back(v);
  pool.hold(residual(ops, {1, 2}, {1, 2}, 1), 1, host_rows(ops, shared));
  std::vector<TokenPool::Completed> done;
  pool.absorb(expert_output(ops, 2, {0, 1}), done);
  pool.absorb(expert_output(ops, 1, {0}), done);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].request, 2);
  EXPECT_EQ(values(done[0].shared_out), (std::vector<float>{1.5f, 1.5f, 1.5f, 2.5f, 2.5f, 2.5f}));
  EXPECT_EQ(values(done[0].hidden), (std::vector<float>{200, 200, 200, 201, 201, 201}));
  EXPECT_EQ(done[1].request, 1);
  EXPECT_EQ(values(done[1].shared_out), (std::vector<float>{0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(values(done[1].hidden), (std::vector<float>{100, 100, 100}));
}

TEST(TokenPool, ASharedExpertRunApartIsWaitedForAndSlicedByPosition) {
  HostActivationOps ops;
  Pool pool;
  // findep: the shared expert's rows come later, as a batch of their own (here in reverse
  // request order, and the rows of request 2 split over two batches).
  pool.hold(residual(ops, {1, 2}, {1, 2}, 1), 1, {}, /*shared_to_come=*/true);
  std::vector<TokenPool::Completed> done;
  pool.absorb(expert_output(ops, 2, {0, 1}), done);
  pool.absorb(expert_output(ops, 1, {0}), done);
  EXPECT_TRUE(done.empty());  // every expert output is back, the shared expert's is not
  const auto shared_rows = [&](const std::vector<std::pair<std::int64_t, std::int32_t>>& rows) {
    TokenBatch b;
    b.columns = kAttentionColumns;
    std::vector<float> hidden;
    for (const auto& [request, position] : rows) {
      b.row.push_back({.request = request, .position = position, .rank = 0});
      for (std::int64_t c = 0; c < kWidth; ++c) hidden.push_back(static_cast<float>(request * 10 + position) + 0.5f);
    }
    b.hidden = host_rows(ops, hidden);
    return b;
  };
  pool.absorb_shared(shared_rows({{2, 11}}), done);
  EXPECT_TRUE(done.empty());
  pool.absorb_shared(shared_rows({{2, 10}, {1, 10}}), done);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_TRUE(pool.empty());
  EXPECT_EQ(done[0].request, 2);
  EXPECT_EQ(values(done[0].shared_out), (std::vector<float>{30.5f, 30.5f, 30.5f, 31.5f, 31.5f, 31.5f}));
  EXPECT_EQ(done[1].request, 1);
  EXPECT_EQ(values(done[1].shared_out), (std::vector<float>{20.5f, 20.5f, 20.5f}));
  EXPECT_EQ(values(done[1].hidden), (std::vector<float>{100, 100, 100}));
}

TEST(TokenPool, ManyRequestsPerBatchWithOutputsInRandomOrder) {
  // 40 requests held in four residual batches, top-4, outputs split into random batches that
  // mix requests, delivered in a random global order.
  constexpr std::int32_t K = 4;
  std::mt19937_64 rng(3);
  HostActivationOps ops;
  Pool pool;
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
    pool.hold(residual(ops, requests, rows, 3), K, {});
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
      TokenBatch one = expert_output(ops, outputs[j].first, {outputs[j].second});
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
      const std::vector<float> slot_outputs = values(c.slot_outputs);
      for (std::int32_t s = 0; s < rows_of[c.request] * K; ++s)
        EXPECT_EQ(slot_outputs[static_cast<std::size_t>(s * kWidth)], static_cast<float>(c.request * 1000 + s * 10));
      EXPECT_EQ(values(c.hidden).size(), static_cast<std::size_t>(rows_of[c.request] * kWidth));
    }
    EXPECT_EQ(released, expect_released);
    i += n;
  }
  EXPECT_TRUE(pool.empty());
}

TEST(TokenPool, WithoutTensorsCountsRowsOnly) {
  // The sim backend moves no activations: the pool must still release on the last slot.
  HostActivationOps ops;
  Pool pool;
  TokenBatch r = residual(ops, {4}, {3}, 1);
  r.hidden.reset();
  pool.hold(std::move(r), 2, {});
  TokenBatch a = expert_output(ops, 4, {0, 1, 2}), b = expert_output(ops, 4, {3, 4, 5});
  a.hidden.reset();
  b.hidden.reset();
  std::vector<TokenPool::Completed> done;
  pool.absorb(a, done);
  EXPECT_TRUE(done.empty());
  pool.absorb(b, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].hidden.null());
  EXPECT_TRUE(done[0].slot_outputs.null());
  EXPECT_EQ(done[0].rows, 3);
}

TEST(TokenPool, HoldWritesEachRequestsEntryIntoItsRows) {
  // Every row of a request carries the request's entry, and each request its own; a released
  // entry is given to the next request held, and the residual's columns say the rows carry one.
  HostActivationOps ops;
  TokenPool pool;
  TokenBatch first = residual(ops, {5, 8, 3}, {2, 1, 3}, 1);
  first.hidden.reset();
  pool.hold(first, 1, {});
  EXPECT_TRUE(first.has(kColumnEntry));
  EXPECT_TRUE(first.has(kColumnPosition));
  std::map<std::int64_t, std::set<std::int32_t>> entries;
  for (const TokenRow& row : first.row) entries[row.request].insert(row.entry);
  ASSERT_EQ(entries.size(), 3u);
  std::set<std::int32_t> distinct;
  for (const auto& [request, e] : entries) {
    ASSERT_EQ(e.size(), 1u) << "request " << request;
    distinct.insert(*e.begin());
  }
  EXPECT_EQ(distinct.size(), 3u);
  // Request 8's one output is in: its entry goes to the next request held.
  TokenBatch out;
  out.layer = first.layer;
  out.columns = kOutputColumns;
  out.row.push_back({.request = 8, .slot = 0, .entry = *entries[8].begin()});
  std::vector<TokenPool::Completed> done;
  pool.absorb(out, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].request, 8);
  TokenBatch next = residual(ops, {42}, {2}, 1);
  next.hidden.reset();
  pool.hold(next, 1, {});
  EXPECT_EQ(next.row[0].entry, *entries[8].begin());
  EXPECT_EQ(next.row[1].entry, *entries[8].begin());
  EXPECT_EQ(pool.capacity(), 3u);
}

TEST(TokenPool, TakesOutputsByTheirEntriesWhateverTheRequestIds) {
  // Random ids (negative, huge, neighbours) are held and released in overlapping waves while
  // entries are reused: each request must leave exactly when its last output is in, with its
  // own rows, found by the entry its outputs carry.
  constexpr std::int32_t K = 2;
  std::mt19937_64 rng(17);
  HostActivationOps ops;
  Pool pool;
  std::set<std::int64_t> used;
  std::map<std::int64_t, std::int32_t> remaining;  // held requests -> outputs still to come
  std::vector<std::pair<std::int64_t, std::int32_t>> pending;  // (request, slot) not delivered
  std::vector<TokenPool::Completed> done;
  std::size_t released = 0;
  auto fresh_id = [&] {
    for (;;) {
      std::int64_t id;
      switch (rng() % 4) {
        case 0: id = static_cast<std::int64_t>(rng()); break;                       // any, negative too
        case 1: id = static_cast<std::int64_t>(rng() % 5000); break;                // dense
        case 2: id = static_cast<std::int64_t>(rng() % 64) << 40; break;            // a stride apart
        default: id = std::numeric_limits<std::int64_t>::max() - static_cast<std::int64_t>(rng() % 100);
      }
      if (id != std::numeric_limits<std::int64_t>::min() && used.insert(id).second) return id;
    }
  };
  for (int wave = 0; wave < 60; ++wave) {
    // Hold a batch of 1..40 requests of 1..3 rows, without activations (the sim's path).
    std::vector<std::int64_t> requests;
    std::vector<std::int32_t> rows;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      requests.push_back(fresh_id());
      rows.push_back(static_cast<std::int32_t>(1 + rng() % 3));
      remaining[requests.back()] = rows.back() * K;
      for (std::int32_t s = 0; s < rows.back() * K; ++s) pending.emplace_back(requests.back(), s);
    }
    TokenBatch res = residual(ops, requests, rows, 2);
    res.hidden.reset();
    pool.hold(std::move(res), K, {});
    ASSERT_EQ(pool.size(), remaining.size());
    // Deliver a random part of what is pending, in random order and batches.
    std::shuffle(pending.begin(), pending.end(), rng);
    std::size_t take = pending.size() * (wave % 3 == 2 ? 1 : 2) / 3;
    if (wave == 59) take = pending.size();
    std::set<std::int64_t> expect_released;
    TokenBatch delivery;
    for (std::size_t j = 0; j < take; ++j) {
      delivery.columns = kAttentionColumns | kColumnSlot | kColumnWeight;
      delivery.row.push_back({.request = pending[j].first, .position = 0, .rank = 0, .slot = pending[j].second, .weight = 1.0f});
      if (--remaining[pending[j].first] == 0) expect_released.insert(pending[j].first);
    }
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(take));
    done.clear();
    pool.absorb(delivery, done);
    std::set<std::int64_t> got;
    for (const auto& c : done) {
      EXPECT_TRUE(got.insert(c.request).second) << "request " << c.request << " released twice";
      EXPECT_EQ(c.first_position, 10);
      remaining.erase(c.request);
    }
    EXPECT_EQ(got, expect_released);
    released += done.size();
    ASSERT_EQ(pool.size(), remaining.size());
  }
  EXPECT_TRUE(pool.empty());
  EXPECT_EQ(released, used.size());
}

TEST(TokenPool, ReusesReleasedEntries) {
  // A long run holds and releases millions of entries: the pool's storage must not grow with them.
  HostActivationOps ops;
  Pool pool;
  std::vector<TokenPool::Completed> done;
  for (std::int64_t r = 0; r < 1000; ++r) {
    TokenBatch res = residual(ops, {r}, {1}, 1);
    res.hidden.reset();
    pool.hold(std::move(res), 1, {});
    TokenBatch out = expert_output(ops, r, {0});
    out.hidden.reset();
    pool.absorb(out, done);
  }
  EXPECT_EQ(done.size(), 1000u);
  EXPECT_TRUE(pool.empty());
  EXPECT_EQ(pool.capacity(), 1u);
}

TEST(TokenPool, SteadyServingTakesNoNewBuffersFromTheDevice) {
  // With activations every hold takes storage for the residual and the slot outputs: once the
  // merged rows are done with it, it goes back to the device's pool and the next hold reuses it.
  HostActivationOps ops;
  Pool pool;
  std::vector<TokenPool::Completed> done;
  std::int64_t after_first = 0;
  for (std::int64_t r = 0; r < 100; ++r) {
    pool.hold(residual(ops, {r}, {2}, 1), 2, {});
    pool.absorb(expert_output(ops, r, {0, 1, 2, 3}), done);
    ASSERT_EQ(done.size(), 1u);
    const auto v = static_cast<float>(r * 100);
    EXPECT_EQ(values(done[0].hidden), (std::vector<float>{v, v, v, v + 1, v + 1, v + 1}));
    done.clear();
    if (r == 0) after_first = ops.pool().heap_allocations();
  }
  EXPECT_TRUE(pool.empty());
  EXPECT_EQ(ops.pool().heap_allocations(), after_first);
  EXPECT_EQ(ops.pool().spare(), after_first);
}

}  // namespace
}  // namespace sy
