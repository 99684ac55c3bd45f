// The virtual event loop's lanes: an event held on a busy owner's lane runs at the owner's
// catch-up with now() at its own time, in the order it would have run as an ordinary event.
#include "engine/runtime/virtual_event_loop.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

namespace sy {
namespace {

// A toy device on lane 0: it executes from 0 to 100 and from 100 to 150, and records every
// arrival and completion with the time it saw. Like a worker, it holds its lane while it runs,
// catches up before it reads (a completion, an arrival that came as an ordinary event) and
// releases the lane when it goes idle.
struct Device {
  VirtualEventLoop& loop;
  bool use_lanes;
  std::vector<std::pair<int, std::int64_t>> log;  // (what, when): arrivals >= 0, completions < 0
  int executions = 0;

  void start(std::int64_t end) {
    if (use_lanes) loop.lane(0)->held = true;
    loop.post_call(end, &Device::complete, this, 0);
  }
  static void complete(void* ctx, std::uint64_t) {
    auto& d = *static_cast<Device*>(ctx);
    if (d.use_lanes) d.loop.catch_up_lane(0);
    d.log.push_back({-1 - d.executions, d.loop.now()});
    if (++d.executions == 1) {
      d.start(150);  // busy again at once: what is still held stays held
    } else if (d.use_lanes) {
      d.loop.release_lane(0);
    }
  }
  static void arrive(void* ctx, std::uint64_t id) {
    auto& d = *static_cast<Device*>(ctx);
    if (d.use_lanes) d.loop.catch_up_lane(0);
    d.log.push_back({static_cast<int>(id), d.loop.now()});
  }
};

// Arrivals posted at several moments, out of time order, with ties against the completions
// and an arrival posted before the device started (an ordinary event while it runs).
std::vector<std::pair<int, std::int64_t>> run_scenario(bool use_lanes, std::int64_t* events) {
  VirtualEventLoop loop;
  Device d{loop, use_lanes, {}, 0};
  loop.post_call_to(0, 60, &Device::arrive, &d, 0);  // before the hold: queued
  loop.post_call(0, [](void* ctx, std::uint64_t) { static_cast<Device*>(ctx)->start(100); }, &d, 0);
  loop.post_call(10, [](void* ctx, std::uint64_t) {
    auto& dev = *static_cast<Device*>(ctx);
    dev.loop.post_call_to(0, 40, &Device::arrive, ctx, 1);
    dev.loop.post_call_to(0, 30, &Device::arrive, ctx, 2);   // earlier than 1, posted later
    dev.loop.post_call_to(0, 100, &Device::arrive, ctx, 3);  // ties the completion, posted after it
    dev.loop.post_call_to(0, 60, &Device::arrive, ctx, 4);   // ties 0, posted after it
    dev.loop.post_call_to(0, 120, &Device::arrive, ctx, 5);  // during the second execution
    dev.loop.post_call_to(0, 170, &Device::arrive, ctx, 6);  // after both: released, queued
  }, &d, 0);
  *events = loop.run();
  return d.log;
}

TEST(VirtualEventLoop, HeldLaneEventsRunInTheirOwnOrderAtTheirOwnTime) {
  std::int64_t plain_events = 0;
  std::int64_t lane_events = 0;
  const auto plain = run_scenario(false, &plain_events);
  const auto lanes = run_scenario(true, &lane_events);
  const std::vector<std::pair<int, std::int64_t>> expected{{2, 30}, {1, 40},  {0, 60},  {4, 60},
                                                           {-1, 100}, {3, 100}, {5, 120}, {-2, 150}, {6, 170}};
  EXPECT_EQ(plain, expected);
  EXPECT_EQ(lanes, expected);
  EXPECT_EQ(lane_events, plain_events);  // held events count as run
}

TEST(VirtualEventLoop, CatchUpBetweenRunsTakesHeldEventsUpToNow) {
  VirtualEventLoop loop;
  std::vector<std::int64_t> seen;
  auto record = [](void* ctx, std::uint64_t) {
    auto& s = *static_cast<std::pair<VirtualEventLoop*, std::vector<std::int64_t>*>*>(ctx);
    s.second->push_back(s.first->now());
  };
  std::pair<VirtualEventLoop*, std::vector<std::int64_t>*> ctx{&loop, &seen};
  loop.lane(3)->held = true;
  loop.post_call_to(3, 20, record, &ctx, 0);
  loop.post_call_to(3, 10, record, &ctx, 0);
  loop.post_call_to(3, 50, record, &ctx, 0);
  loop.run_until(30);
  EXPECT_TRUE(seen.empty());  // held: nobody caught up
  EXPECT_EQ(loop.now(), 30);
  loop.catch_up_lane(3);
  EXPECT_EQ(seen, (std::vector<std::int64_t>{10, 20}));
  EXPECT_EQ(loop.now(), 30);  // a catch-up leaves the clock where it was
  loop.release_lane(3);       // the one left is an ordinary event again
  EXPECT_EQ(loop.run(), 1);
  EXPECT_EQ(seen, (std::vector<std::int64_t>{10, 20, 50}));
}

TEST(VirtualEventLoop, UnheldLanesAreOrdinaryEvents) {
  VirtualEventLoop loop;
  std::vector<int> order;
  auto push = [](void* ctx, std::uint64_t id) { static_cast<std::vector<int>*>(ctx)->push_back(static_cast<int>(id)); };
  loop.post_call_to(7, 5, push, &order, 1);
  loop.post_call(5, push, &order, 2);
  loop.post_call_to(2, 1, push, &order, 3);
  EXPECT_EQ(loop.run(), 3);
  EXPECT_EQ(order, (std::vector<int>{3, 1, 2}));
}

// The event running keeps the heap's root until it posts or ends (run_next): whatever each
// handler posts (nothing, one event, several, ties in time), events run in (time, posting)
// order, as a sorted set of the pending (time, sequence) pairs says, and pending() counts
// only what has not run.
TEST(VirtualEventLoop, RunsEventsInTimeThenPostingOrderWhateverHandlersPost) {
  struct World {
    VirtualEventLoop loop;
    std::mt19937_64 rng{17};
    std::set<std::pair<std::int64_t, std::uint64_t>> expected;  // (time, sequence) not run yet
    std::uint64_t next_seq = 0;
    int posts_left = 20000;
    std::vector<std::pair<std::int64_t, std::uint64_t>> ran;
    bool in_order = true;
    bool counts_right = true;
    void post(std::int64_t at) {
      expected.insert({at, next_seq});
      loop.post_call(at, &World::run, this, next_seq++);
      --posts_left;
    }
    static void run(void* ctx, std::uint64_t seq) {
      auto& w = *static_cast<World*>(ctx);
      const std::pair<std::int64_t, std::uint64_t> me{w.loop.now(), seq};
      w.in_order = w.in_order && !w.expected.empty() && *w.expected.begin() == me;
      w.expected.erase(me);
      w.ran.push_back(me);
      w.counts_right = w.counts_right && w.loop.pending() == w.expected.size();
      // 0 to 3 events, at now (a tie with what is queued there) or up to 50 ns later.
      const int n = static_cast<int>(w.rng() % 4);
      for (int i = 0; i < n && w.posts_left > 0; ++i) w.post(w.loop.now() + static_cast<std::int64_t>(w.rng() % 51));
      w.counts_right = w.counts_right && w.loop.pending() == w.expected.size();
    }
  } w;
  for (int i = 0; i < 40; ++i) w.post(static_cast<std::int64_t>(w.rng() % 100));
  const std::int64_t posted = static_cast<std::int64_t>(w.next_seq);
  const std::int64_t ran = w.loop.run();
  EXPECT_EQ(ran, static_cast<std::int64_t>(w.next_seq));
  EXPECT_GT(static_cast<std::int64_t>(w.next_seq), posted);
  EXPECT_TRUE(w.in_order);
  EXPECT_TRUE(w.counts_right);
  EXPECT_TRUE(w.expected.empty());
  EXPECT_TRUE(w.loop.idle());
}

// A handler that throws has still run: the next run goes on with the events after it, and
// run_until still stops at its time.
TEST(VirtualEventLoop, AnEventThatThrowsHasRun) {
  VirtualEventLoop loop;
  std::vector<int> order;
  auto record = [](void* ctx, std::uint64_t id) { static_cast<std::vector<int>*>(ctx)->push_back(static_cast<int>(id)); };
  auto fail = [](void*, std::uint64_t) { throw std::runtime_error("handler failed"); };
  loop.post_call(10, fail, nullptr, 0);
  loop.post_call(20, record, &order, 1);
  loop.post_call(40, record, &order, 2);
  EXPECT_THROW(loop.run(), std::runtime_error);
  EXPECT_EQ(loop.pending(), 2u);
  loop.run_until(30);
  EXPECT_EQ(order, (std::vector<int>{1}));
  EXPECT_EQ(loop.run(), 1);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace sy
