#include "engine/runtime/wall_clock_event_loop.h"

#include <algorithm>
#include <limits>

namespace sy {

WallClockEventLoop::WallClockEventLoop() : origin_(std::chrono::steady_clock::now()) {}

std::int64_t WallClockEventLoop::clock_now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin_).count();
}

void WallClockEventLoop::post(std::int64_t at, std::function<void()> fn) {
  timers_.push_back(Event{at, seq_++, std::move(fn)});
  std::push_heap(timers_.begin(), timers_.end(), Later{});
}

void WallClockEventLoop::post_external(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    external_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

std::int64_t WallClockEventLoop::run_ready() {
  std::vector<std::function<void()>> taken;
  {
    std::lock_guard lock(mutex_);
    taken.swap(external_);
  }
  std::int64_t count = 0;
  for (auto& fn : taken) {
    fn();
    ++count;
  }
  // Only timers due now: a handler that posts at now() is run in this pass too, a later
  // one waits for its time.
  while (!timers_.empty() && timers_.front().at <= now()) {
    std::pop_heap(timers_.begin(), timers_.end(), Later{});
    std::function<void()> fn = std::move(timers_.back().fn);
    timers_.pop_back();
    fn();
    ++count;
  }
  return count;
}

void WallClockEventLoop::wait(std::int64_t deadline) {
  std::unique_lock lock(mutex_);
  if (!external_.empty()) return;
  if (deadline == std::numeric_limits<std::int64_t>::max()) {
    cv_.wait(lock, [this] { return !external_.empty(); });
  } else {
    cv_.wait_until(lock, origin_ + std::chrono::nanoseconds(deadline), [this] { return !external_.empty(); });
  }
}

std::int64_t WallClockEventLoop::run(const std::function<bool()>& stop) {
  std::int64_t count = 0;
  for (;;) {
    const std::int64_t ran = run_ready();
    count += ran;
    if (ran > 0 && stop && stop()) break;
    bool idle;
    {
      std::lock_guard lock(mutex_);
      idle = timers_.empty() && external_.empty() && outside_work() == 0;
    }
    if (idle) break;
    wait(timers_.empty() ? std::numeric_limits<std::int64_t>::max() : timers_.front().at);
  }
  return count;
}

void WallClockEventLoop::run_until(std::int64_t t) {
  while (now() < t) {
    run_ready();
    wait(timers_.empty() ? t : std::min(t, timers_.front().at));
  }
  run_ready();
}

}  // namespace sy
