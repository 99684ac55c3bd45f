#include "console/model/lane_spans.h"

#include <algorithm>

namespace sy::console {

void LaneSpans::add(const telemetry::Span& span) {
  if (spans_.empty() || spans_.back().start_ns <= span.start_ns) {
    const std::int64_t prev = max_end_.empty() ? span.end_ns : std::max(max_end_.back(), span.end_ns);
    spans_.push_back(span);
    max_end_.push_back(prev);
    return;
  }
  // Late arrival: insert after every span that starts no later, then repair the running maximum.
  auto pos = std::upper_bound(spans_.begin(), spans_.end(), span.start_ns,
                              [](std::int64_t t, const telemetry::Span& s) { return t < s.start_ns; });
  const auto index = static_cast<std::size_t>(pos - spans_.begin());
  spans_.insert(pos, span);
  max_end_.insert(max_end_.begin() + static_cast<std::ptrdiff_t>(index), 0);
  for (std::size_t i = index; i < spans_.size(); ++i)
    max_end_[i] = i == 0 ? spans_[i].end_ns : std::max(max_end_[i - 1], spans_[i].end_ns);
}

std::size_t LaneSpans::drop_ended_before(std::int64_t cutoff_ns) {
  std::size_t n = 0;
  while (n < spans_.size() && spans_[n].end_ns < cutoff_ns) ++n;
  drop_front(n);
  return n;
}

void LaneSpans::drop_front(std::size_t n) {
  n = std::min(n, spans_.size());
  spans_.erase(spans_.begin(), spans_.begin() + static_cast<std::ptrdiff_t>(n));
  max_end_.erase(max_end_.begin(), max_end_.begin() + static_cast<std::ptrdiff_t>(n));
}

void LaneSpans::clear() {
  spans_.clear();
  max_end_.clear();
}

std::size_t LaneSpans::first_ending_at_or_after(std::int64_t t) const {
  return static_cast<std::size_t>(std::lower_bound(max_end_.begin(), max_end_.end(), t) - max_end_.begin());
}

std::size_t LaneSpans::first_starting_at_or_after(std::int64_t t) const {
  return static_cast<std::size_t>(
      std::lower_bound(spans_.begin(), spans_.end(), t,
                       [](const telemetry::Span& s, std::int64_t v) { return s.start_ns < v; }) -
      spans_.begin());
}

std::size_t LaneSpans::first_starting_after(std::int64_t t) const {
  return static_cast<std::size_t>(
      std::upper_bound(spans_.begin(), spans_.end(), t,
                       [](std::int64_t v, const telemetry::Span& s) { return v < s.start_ns; }) -
      spans_.begin());
}

}  // namespace sy::console
