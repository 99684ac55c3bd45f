// Discrete-event loop over virtual time (sim, deterministic tests): a priority queue of
// (time, sequence) events. Time jumps to the next event, so a run is as fast as its handlers
// and replays exactly.
#pragma once

#include <algorithm>
#include <atomic>
#include <cassert>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/runtime/event_loop.h"

namespace sy {

class VirtualEventLoop final : public EventLoop {
 public:
  VirtualEventLoop() { virtual_now_ = &now_; }
  void post(std::int64_t at, std::function<void()> fn) override;
  void post_call(std::int64_t at, Callback fn, void* ctx, std::uint64_t arg) override;
  void post_call_to(std::int32_t lane, std::int64_t at, Callback fn, void* ctx, std::uint64_t arg) override {
    const auto l = static_cast<std::size_t>(lane);
    if (l < lanes_.size() && lanes_[l] && lanes_[l]->held) {
      // Most held arrivals come after every one held before them and find room: appended here.
      // hold, out of line, saved six registers for its insertion and growth paths on each.
      // (A push_back here kept its growth path inline, and with it hold's register saves.)
      HeldLane& h = *lanes_[l];
      const std::int64_t t = std::max(at, now_);
      if ((h.waiting == 0 || h.events[h.tail - 1].at <= t) && h.tail < h.events.size()) [[likely]] {
        assert(!catching_up_);
        ++h.waiting;
        h.events[h.tail++] = Held{t, seq_++, Call{fn, ctx, arg}};
        return;
      }
      return hold(h, at, fn, ctx, arg);
    }
    post_call(at, fn, ctx, arg);
  }
  Lane* lane(std::int32_t lane) override;
  void catch_up_lane(std::int32_t lane) override {
    const auto l = static_cast<std::size_t>(lane);
    if (l < lanes_.size() && lanes_[l] && lanes_[l]->waiting > 0) catch_up(*lanes_[l]);
  }
  void release_lane(std::int32_t lane) override {
    const auto l = static_cast<std::size_t>(lane);
    if (l >= lanes_.size() || !lanes_[l]) return;
    lanes_[l]->held = false;
    if (lanes_[l]->waiting > 0) requeue(*lanes_[l]);
  }
  // In a paced run an external post runs at the virtual time the wall clock says (never past
  // the next scheduled event); a paced wait is cut short.
  void post_external(std::function<void()> fn) override;
  std::int64_t run(const std::function<bool()>& stop = {}) override;
  void run_until(std::int64_t t) override;
  bool virtual_time() const override { return true; }
  double pace() const override { return pace_; }

  // Paced runs keep virtual time in step with the wall clock: `speed` virtual seconds per wall
  // second (1: real time), so a live view of a simulated cluster looks like the real one. The
  // loop waits for the wall clock between events; the handlers never do. 0: as fast as the
  // handlers allow (the default).
  void set_pace(double speed);
  bool idle() const { return pending() == 0; }
  // Events run since construction (simulator speed is events per wall second).
  std::int64_t events_run() const { return events_run_; }
  std::size_t pending() const { return events_.size() - (root_free_ ? 1 : 0); }

 private:
  // The heap orders small records; the calls stay put in a slab (moving them on every sift
  // costs more than the comparison). A std::function posted by post() waits in a slab of its
  // own, its call a trampoline to it.
  struct Event {
    std::int64_t at;
    std::uint64_t seq;
    std::uint32_t slot;
  };
  struct Call {
    Callback fn;
    void* ctx;
    std::uint64_t arg;
  };
  static void run_function(void* loop, std::uint64_t slot);
  // A lane's events held while its device executes, in (time, sequence) order from `head`.
  struct Held {
    std::int64_t at;
    std::uint64_t seq;
    Call call;
  };
  struct HeldLane : Lane {
    std::size_t head = 0;  // events[head, tail) wait (waiting of them)
    std::size_t tail = 0;
    std::vector<Held> events;  // its size is the room made so far: [tail, size) is free
  };
  // Places `e` in the heap whose root is free (the event there has run or is running).
  void fill_root(const Event& e);
  // Removes the root, its event run, when it posted nothing to take its place.
  void drop_root();
  // Queues a call with the (time, sequence) it was given.
  void push(std::int64_t at, std::uint64_t seq, const Call& call);
  // The lanes' slow paths: keep an event back, run those due, queue those left.
  [[gnu::noinline]] void hold(HeldLane& lane, std::int64_t at, Callback fn, void* ctx, std::uint64_t arg);
  void catch_up(HeldLane& lane);
  void requeue(HeldLane& lane);
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };
  // Waits until wall time reaches virtual time `at` (paced runs), or an external post arrives.
  void wait_for_wall_clock(std::int64_t at);
  // Moves externally posted functions into the event queue.
  void take_external();
  // Pops the earliest event, advances now() to it and runs it.
  void run_next();
  std::int64_t clock_now() const override { return now_; }

  std::int64_t now_ = 0;
  // The (time, sequence) of the event running: held events before it are due at a catch-up.
  std::int64_t current_at_ = 0;
  std::uint64_t current_seq_ = 0;
  bool catching_up_ = false;
  std::vector<std::unique_ptr<HeldLane>> lanes_;
  std::uint64_t seq_ = 0;
  std::int64_t events_run_ = 0;
  double pace_ = 0;
  std::int64_t pace_virtual_origin_ = 0;
  std::int64_t pace_wall_origin_ = 0;
  std::vector<Event> events_;  // binary heap under Later
  // The root of events_ is the event running, no longer queued: the next push takes its place.
  bool root_free_ = false;
  std::vector<Call> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<std::function<void()>> functions_;
  std::vector<std::uint32_t> free_functions_;
  std::mutex external_mutex_;
  std::condition_variable external_cv_;
  std::vector<std::function<void()>> external_;
  std::atomic<bool> has_external_{false};
};

}  // namespace sy
