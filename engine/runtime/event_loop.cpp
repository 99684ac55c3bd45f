#include "engine/runtime/event_loop.h"

#include <algorithm>
#include <cassert>

namespace sy {

void VirtualEventLoop::post(std::int64_t at, std::function<void()> fn) {
  events_.push(Event{std::max(at, now_), seq_++, std::move(fn)});
}

std::int64_t VirtualEventLoop::run(const std::function<bool()>& stop) {
  std::int64_t count = 0;
  while (!events_.empty()) {
    // The handler may post more events, so move it out before popping.
    Event e = std::move(const_cast<Event&>(events_.top()));
    events_.pop();
    assert(e.at >= now_);
    now_ = e.at;
    e.fn();
    ++count;
    if (stop && stop()) break;
  }
  return count;
}

void VirtualEventLoop::run_until(std::int64_t t) {
  while (!events_.empty() && events_.top().at <= t) {
    Event e = std::move(const_cast<Event&>(events_.top()));
    events_.pop();
    now_ = e.at;
    e.fn();
  }
  now_ = std::max(now_, t);
}

}  // namespace sy
