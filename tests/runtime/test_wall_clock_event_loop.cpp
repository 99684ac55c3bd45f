// The wall-clock event loop: timers in time order and not early, posts from other threads run
// on the loop's thread, and a run waits for work that is still on a device.
#include "engine/runtime/wall_clock_event_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace sy {
namespace {

TEST(WallClockEventLoop, TimersRunInTimeOrderAndNeverEarly) {
  WallClockEventLoop loop;
  std::vector<int> order;
  std::vector<std::int64_t> late;
  for (int i : {3, 1, 2}) {
    const std::int64_t at = i * 2'000'000;  // 2, 4, 6 ms
    loop.post(at, [&, i, at] {
      order.push_back(i);
      late.push_back(loop.now() - at);
    });
  }
  loop.post(2'000'000, [&] { order.push_back(10); });  // same time as 1: after it, in posting order
  EXPECT_EQ(loop.run(), 4);
  EXPECT_EQ(order, (std::vector<int>{1, 10, 2, 3}));
  for (std::int64_t l : late) EXPECT_GE(l, 0);
}

TEST(WallClockEventLoop, ExternalPostsRunOnTheLoopThread) {
  WallClockEventLoop loop;
  const auto loop_thread = std::this_thread::get_id();
  std::atomic<int> ran{0};
  bool all_on_loop = true;
  loop.begin_outside_work();  // the senders below are work the run must wait for
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t) {
    senders.emplace_back([&] {
      for (int i = 0; i < 100; ++i)
        loop.post_external([&] {
          all_on_loop = all_on_loop && std::this_thread::get_id() == loop_thread;
          ++ran;
        });
    });
  }
  std::thread closer([&] {
    for (auto& s : senders) s.join();
    loop.post_external([&] { loop.end_outside_work(); });
  });
  loop.run();
  closer.join();
  EXPECT_EQ(ran.load(), 400);
  EXPECT_TRUE(all_on_loop);
}

TEST(WallClockEventLoop, RunStopsWhenAsked) {
  WallClockEventLoop loop;
  int n = 0;
  std::function<void()> again = [&] {
    ++n;
    loop.post(loop.now() + 1'000, again);
  };
  loop.post(0, again);
  loop.run([&] { return n >= 5; });
  EXPECT_EQ(n, 5);
}

TEST(WallClockEventLoop, RunUntilReturnsAtTheTime) {
  WallClockEventLoop loop;
  bool early = false, late = false;
  loop.post(1'000'000, [&] { early = true; });
  loop.post(50'000'000, [&] { late = true; });
  loop.run_until(5'000'000);
  EXPECT_GE(loop.now(), 5'000'000);
  EXPECT_TRUE(early);
  EXPECT_FALSE(late);
}

}  // namespace
}  // namespace sy
