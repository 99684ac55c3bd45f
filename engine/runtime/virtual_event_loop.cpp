#include "engine/runtime/virtual_event_loop.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <limits>

namespace sy {

void VirtualEventLoop::push(std::int64_t at, std::uint64_t seq, const Call& call) {
  std::uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.push_back(call);
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = call;
  }
  if (root_free_) {
    // The event running left the root: the first event it posts takes its place.
    root_free_ = false;
    fill_root(Event{at, seq, slot});
    return;
  }
  events_.push_back(Event{at, seq, slot});
  std::push_heap(events_.begin(), events_.end(), Later{});
}

void VirtualEventLoop::fill_root(const Event& e) {
  // Floyd's order, as std::pop_heap: the hole goes down to a leaf along the earlier child (one
  // comparison per level), then `e` rises from there (mostly a level or two: it is late).
  Event* const h = events_.data();
  const std::size_t n = events_.size();
  std::size_t hole = 0;
  std::size_t child = 2;
  while (child < n) {
    if (Later{}(h[child], h[child - 1])) --child;
    h[hole] = h[child];
    hole = child;
    child = 2 * hole + 2;
  }
  if (child == n) {
    h[hole] = h[child - 1];
    hole = child - 1;
  }
  while (hole > 0) {
    const std::size_t parent = (hole - 1) / 2;
    if (!Later{}(h[parent], e)) break;
    h[hole] = h[parent];
    hole = parent;
  }
  h[hole] = e;
}

void VirtualEventLoop::post_call(std::int64_t at, Callback fn, void* ctx, std::uint64_t arg) {
  assert(!catching_up_ && "a held event posts nothing (it only fills its device's queues)");
  push(std::max(at, now_), seq_++, Call{fn, ctx, arg});
}

void VirtualEventLoop::hold(HeldLane& lane, std::int64_t at, Callback fn, void* ctx, std::uint64_t arg) {
  assert(!catching_up_);
  // It takes its sequence number now, as a queued event would: the order is the same either way.
  const Held h{std::max(at, now_), seq_++, Call{fn, ctx, arg}};
  // Its sequence is the newest: it goes after every held event not later than it. Arrivals
  // come mostly in time order, so the search from the back is short.
  ++lane.waiting;
  if (lane.tail == lane.events.size()) lane.events.resize(std::max<std::size_t>(16, 2 * lane.events.size()));
  std::size_t at_index = lane.tail;
  while (at_index > lane.head && lane.events[at_index - 1].at > h.at) --at_index;
  std::move_backward(lane.events.begin() + static_cast<std::ptrdiff_t>(at_index),
                     lane.events.begin() + static_cast<std::ptrdiff_t>(lane.tail),
                     lane.events.begin() + static_cast<std::ptrdiff_t>(lane.tail + 1));
  lane.events[at_index] = h;
  ++lane.tail;
}

void VirtualEventLoop::catch_up(HeldLane& lane) {
  if (catching_up_) return;
  catching_up_ = true;
  // The held events are deliveries to the lane's device, whose receive first catches up (it
  // cannot tell a held delivery from an ordinary one): a count of zero until this returns keeps
  // that check inline, instead of a virtual call per held event that would find this running.
  lane.waiting = 0;
  const std::int64_t now = now_;
  while (lane.head < lane.tail) {
    const Held& h = lane.events[lane.head];
    if (h.at > current_at_ || (h.at == current_at_ && h.seq > current_seq_)) break;
    const Call call = h.call;
    ++lane.head;
    now_ = h.at;  // the event sees its own time
    call.fn(call.ctx, call.arg);
    ++events_run_;
  }
  now_ = now;
  catching_up_ = false;
  lane.waiting = lane.tail - lane.head;
  if (lane.waiting == 0) {
    lane.tail = 0;
    lane.head = 0;
  }
}

void VirtualEventLoop::requeue(HeldLane& lane) {
  for (std::size_t i = lane.head; i < lane.tail; ++i) {
    const Held& h = lane.events[i];
    push(h.at, h.seq, h.call);
  }
  lane.tail = 0;
  lane.head = 0;
  lane.waiting = 0;
}

EventLoop::Lane* VirtualEventLoop::lane(std::int32_t lane) {
  const auto l = static_cast<std::size_t>(lane);
  if (l >= lanes_.size()) lanes_.resize(l + 1);
  if (!lanes_[l]) lanes_[l] = std::make_unique<HeldLane>();
  return lanes_[l].get();
}

void VirtualEventLoop::post(std::int64_t at, std::function<void()> fn) {
  std::uint32_t slot;
  if (free_functions_.empty()) {
    slot = static_cast<std::uint32_t>(functions_.size());
    functions_.push_back(std::move(fn));
  } else {
    slot = free_functions_.back();
    free_functions_.pop_back();
    functions_[slot] = std::move(fn);
  }
  post_call(at, &VirtualEventLoop::run_function, this, slot);
}

void VirtualEventLoop::run_function(void* loop, std::uint64_t slot) {
  auto& self = *static_cast<VirtualEventLoop*>(loop);
  const auto i = static_cast<std::size_t>(slot);
  // The handler may post more events (and reuse slots): move it out first.
  std::function<void()> fn = std::move(self.functions_[i]);
  self.functions_[i] = nullptr;
  self.free_functions_.push_back(static_cast<std::uint32_t>(slot));
  fn();
}

void VirtualEventLoop::run_next() {
  // The event stays at the root while it runs, its place free: most events post one (a
  // completion its next execution, a send its delivery), and that one fills the root in a
  // single pass, instead of a pop here and a push there. The heap pops in (time, sequence)
  // order whatever its shape, so the events run in the same order either way.
  const Event e = events_.front();
  assert(e.at >= now_);
  now_ = e.at;
  current_at_ = e.at;
  current_seq_ = e.seq;
  const Call call = slots_[e.slot];
  free_slots_.push_back(e.slot);
  root_free_ = true;
  try {
    call.fn(call.ctx, call.arg);
  } catch (...) {
    // The event has run: a later run must not find it at the root.
    if (root_free_) drop_root();
    throw;
  }
  ++events_run_;
  if (root_free_) drop_root();  // it posted nothing
}

void VirtualEventLoop::drop_root() {
  root_free_ = false;
  const Event last = events_.back();
  events_.pop_back();
  if (!events_.empty()) fill_root(last);
}

namespace {
std::int64_t wall_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void VirtualEventLoop::set_pace(double speed) {
  pace_ = speed > 0 ? speed : 0;
  pace_virtual_origin_ = now_;
  pace_wall_origin_ = wall_now_ns();
}

void VirtualEventLoop::wait_for_wall_clock(std::int64_t at) {
  if (pace_ <= 0 || at <= now_) return;
  const auto wall_target = pace_wall_origin_ + static_cast<std::int64_t>(static_cast<double>(at - pace_virtual_origin_) / pace_);
  const std::int64_t ahead = wall_target - wall_now_ns();
  // Sleeping for less than ~50 µs costs more than it keeps in step.
  if (ahead <= 50'000) return;
  std::unique_lock lock(external_mutex_);
  external_cv_.wait_for(lock, std::chrono::nanoseconds(ahead), [this] { return has_external_.load(); });
}

void VirtualEventLoop::post_external(std::function<void()> fn) {
  {
    std::lock_guard lock(external_mutex_);
    external_.push_back(std::move(fn));
    has_external_.store(true);
  }
  external_cv_.notify_one();
}

void VirtualEventLoop::take_external() {
  std::vector<std::function<void()>> taken;
  {
    std::lock_guard lock(external_mutex_);
    taken.swap(external_);
    has_external_.store(false);
  }
  // In a paced run the wall clock may be well past now(): run them at the virtual time the wall
  // clock says, but never beyond the next scheduled event (time only moves forward).
  std::int64_t at = now_;
  if (pace_ > 0) {
    const auto wall_virtual = pace_virtual_origin_ + static_cast<std::int64_t>(
                                                         static_cast<double>(wall_now_ns() - pace_wall_origin_) * pace_);
    at = std::max(at, wall_virtual);
    if (!events_.empty()) at = std::min(at, events_.front().at);
  }
  for (auto& fn : taken) post(at, std::move(fn));
}

std::int64_t VirtualEventLoop::run(const std::function<bool()>& stop) {
  // Pacing counts from the first run, not from construction: setting up a live run (sockets,
  // the console) must not leave the loop "behind" the wall clock before it starts.
  if (events_run_ == 0 && pace_ > 0) set_pace(pace_);
  // Counted with the held events run at catch-ups.
  const std::int64_t first = events_run_;
  while (!events_.empty() || has_external_.load(std::memory_order_relaxed)) {
    if (has_external_.load(std::memory_order_relaxed)) take_external();
    wait_for_wall_clock(events_.front().at);
    if (has_external_.load(std::memory_order_relaxed)) continue;  // woken early: take them first
    run_next();
    if (stop && stop()) break;
  }
  return events_run_ - first;
}

void VirtualEventLoop::run_until(std::int64_t t) {
  for (;;) {
    if (has_external_.load(std::memory_order_relaxed)) take_external();
    if (events_.empty() || events_.front().at > t) break;
    wait_for_wall_clock(events_.front().at);
    if (has_external_.load(std::memory_order_relaxed)) continue;
    run_next();
  }
  now_ = std::max(now_, t);
  // Between runs, a catch-up takes every held event up to t (as run_until would have run them).
  current_at_ = now_;
  current_seq_ = std::numeric_limits<std::uint64_t>::max();
}

}  // namespace sy
