// Event loop on the wall clock (cpu and cuda devices): timers in a heap, completions and
// control input posted from other threads; the loop thread sleeps until the next timer or the
// next post, whichever comes first.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "engine/runtime/event_loop.h"

namespace sy {

class WallClockEventLoop final : public EventLoop {
 public:
  WallClockEventLoop();
  void post(std::int64_t at, std::function<void()> fn) override;
  void post_external(std::function<void()> fn) override;
  std::int64_t run(const std::function<bool()>& stop = {}) override;
  void run_until(std::int64_t t) override;
  bool virtual_time() const override { return false; }
  double pace() const override { return 1.0; }

  // The steady-clock instant that now() == 0 stands for.
  std::chrono::steady_clock::time_point origin() const { return origin_; }

 private:
  // Nanoseconds since construction, from the steady clock; callable from any thread.
  std::int64_t clock_now() const override;
  struct Event {
    std::int64_t at;
    std::uint64_t seq;
    std::function<void()> fn;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.at != b.at ? a.at > b.at : a.seq > b.seq; }
  };
  // Runs every external post, then every timer that is due; returns how many ran.
  std::int64_t run_ready();
  // Sleeps until `deadline` (ns on our time base) or until an external post arrives.
  void wait(std::int64_t deadline);

  const std::chrono::steady_clock::time_point origin_;
  std::uint64_t seq_ = 0;
  std::vector<Event> timers_;  // binary heap under Later; loop thread only
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::function<void()>> external_;  // under mutex_
};

}  // namespace sy
