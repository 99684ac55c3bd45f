// The clock and event loop every worker reacts through. Worker logic only ever calls now() and
// post(), so the same code runs under virtual time (sim, deterministic tests) and wall time
// (cpu and cuda devices that finish work on their own threads and streams).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace sy {

class EventLoop {
 public:
  virtual ~EventLoop() = default;
  // Current time in nanoseconds on this run's time base (0 when the loop was made). Inline on
  // a virtual loop, whose clock is a variable: the simulator reads it millions of times a second.
  std::int64_t now() const { return virtual_now_ ? *virtual_now_ : clock_now(); }
  // Runs fn on the loop's thread at time `at` (not before now()). Events at the same time run
  // in posting order. Only from the loop's thread.
  virtual void post(std::int64_t at, std::function<void()> fn) = 0;
  void post_now(std::function<void()> fn) { post(now(), std::move(fn)); }
  // post() for a plain function pointer: fn(ctx, arg) at `at`, ordered with post()'s events.
  // The simulator's hot paths (deliveries, completions: hundreds of thousands a second) use
  // it; a virtual loop keeps the call in the event record, with no std::function to build,
  // move and destroy.
  using Callback = void (*)(void* ctx, std::uint64_t arg);
  virtual void post_call(std::int64_t at, Callback fn, void* ctx, std::uint64_t arg) {
    post(at, [fn, ctx, arg] { fn(ctx, arg); });
  }
  // Lanes: the simulator's shortcut for arrivals at a busy device. A lane is one device's
  // receptor. While its device executes, the device holds its lane (Lane::held), and an event
  // posted to the lane (a shipment's delivery) changes only that device's own queues and token
  // pool, which nothing reads before the device next catches up: when its execution completes,
  // when another arrival reaches it by an ordinary event, or when its state is read
  // (catch_up_lane). A virtual loop keeps such an event out of its queue and runs it at the
  // catch-up, with now() at the event's own time, in the order (time, then posting order) it
  // would have run in: every event runs in the same order relative to every event that can see
  // its effect, at the same virtual time; only the heap push and pop are saved. Releasing the
  // lane (the device goes idle) queues what is still held as ordinary events with their
  // original order. A wall-clock loop has no lanes: post_call_to is post_call, lane() is null.
  // Lanes are numbered by device: one cluster per loop.
  virtual void post_call_to(std::int32_t /*lane*/, std::int64_t at, Callback fn, void* ctx, std::uint64_t arg) {
    post_call(at, fn, ctx, arg);
  }
  // What a device reads and sets of its lane without a call (it does so per execution).
  struct Lane {
    bool held = false;
    std::size_t waiting = 0;  // events held back and not run yet (0 while the loop runs them)
  };
  // Lane `lane`, made on first use, at an address that stays; null where the loop has none.
  virtual Lane* lane(std::int32_t /*lane*/) { return nullptr; }
  // Runs the lane's held events that come before the event now running (all posted ones with
  // time ≤ now() outside an event). Does nothing when called from a held event.
  virtual void catch_up_lane(std::int32_t /*lane*/) {}
  // No longer held: what still waits is queued as ordinary events, in its original order.
  virtual void release_lane(std::int32_t /*lane*/) {}

  // The one entry from other threads (device completions, transports, control commands): fn
  // runs on the loop's thread as soon as it can, before any later-scheduled event.
  virtual void post_external(std::function<void()> fn) = 0;

  // Runs events until none is left (nor any external post outstanding) or `stop()` returns
  // true (checked after each event). Returns the number of events run.
  virtual std::int64_t run(const std::function<bool()>& stop = {}) = 0;
  // Runs events whose time is ≤ t, then returns with now() ≥ t.
  virtual void run_until(std::int64_t t) = 0;

  // Whether time is simulated (jumps from event to event) rather than the wall clock's.
  virtual bool virtual_time() const = 0;
  // Virtual seconds per wall second: 1 on the wall clock; a virtual loop's pace, 0 unpaced.
  virtual double pace() const = 0;

  // Work the loop must wait for that is not an event yet: a device execution or a transfer
  // running elsewhere whose completion will arrive by post_external. run() does not return
  // while any is outstanding, even with no event queued.
  void begin_outside_work() { outside_work_.fetch_add(1, std::memory_order_relaxed); }
  void end_outside_work() { outside_work_.fetch_sub(1, std::memory_order_relaxed); }
  std::int64_t outside_work() const { return outside_work_.load(std::memory_order_relaxed); }

 protected:
  // A virtual loop points this at its clock; otherwise now() asks clock_now().
  const std::int64_t* virtual_now_ = nullptr;
  virtual std::int64_t clock_now() const = 0;

 private:
  std::atomic<std::int64_t> outside_work_{0};
};

}  // namespace sy
