// The spans of one timeline lane (one device, one of compute/send/receive), kept sorted by start
// time with a running maximum of end times, so that visibility and level-of-detail queries are
// binary searches even when transfer spans overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "telemetry/events.h"

namespace sy::console {

class LaneSpans {
 public:
  // Inserts in start order; spans normally arrive in order, so this is an append.
  void add(const telemetry::Span& span);
  // Drops spans that ended before `cutoff_ns` from the front; returns how many went.
  std::size_t drop_ended_before(std::int64_t cutoff_ns);
  // Drops the `n` earliest-starting spans.
  void drop_front(std::size_t n);
  void clear();

  std::size_t size() const { return spans_.size(); }
  bool empty() const { return spans_.empty(); }
  const telemetry::Span& operator[](std::size_t i) const { return spans_[i]; }
  // Largest end_ns among spans [0, i].
  std::int64_t max_end_through(std::size_t i) const { return max_end_[i]; }

  // Index of the first span that may overlap [t, ...): every span before it ended before t.
  std::size_t first_ending_at_or_after(std::int64_t t) const;
  // Index of the first span starting at or after t.
  std::size_t first_starting_at_or_after(std::int64_t t) const;
  // Index of the first span starting after t.
  std::size_t first_starting_after(std::int64_t t) const;

 private:
  std::deque<telemetry::Span> spans_;
  std::deque<std::int64_t> max_end_;
};

}  // namespace sy::console
