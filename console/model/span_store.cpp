#include "console/model/span_store.h"

#include <algorithm>

namespace sy::console {

bool SpanStore::add(const telemetry::Span& span) {
  const auto lane_index = static_cast<int>(span.lane);
  if (span.device < 0 || span.device >= kMaxDevices || lane_index >= kLaneCount || span.end_ns < span.start_ns) {
    ++rejected_;
    return false;
  }
  if (span.device >= device_count()) devices_.resize(static_cast<std::size_t>(span.device) + 1);
  devices_[static_cast<std::size_t>(span.device)][static_cast<std::size_t>(lane_index)].add(span);
  history_.add(span, history_from_spans_);
  ++size_;
  end_ns_ = std::max(end_ns_, span.end_ns);
  // A transfer travels as one record on its source's send lane; its destination's receive
  // lane shows the same interval with the source as peer (docs/telemetry-protocol.md).
  if (span.kind == telemetry::SpanKind::Transfer && span.lane == telemetry::Lane::Send && span.peer >= 0 &&
      span.peer < kMaxDevices) {
    telemetry::Span received = span;
    received.device = span.peer;
    received.peer = span.device;
    received.lane = telemetry::Lane::Receive;
    if (received.device >= device_count()) devices_.resize(static_cast<std::size_t>(received.device) + 1);
    devices_[static_cast<std::size_t>(received.device)][static_cast<std::size_t>(telemetry::Lane::Receive)].add(received);
    history_.add(received, history_from_spans_);
    ++size_;
  }
  return true;
}

void SpanStore::clear() {
  devices_.clear();
  history_.clear();
  size_ = 0;
  end_ns_ = std::numeric_limits<std::int64_t>::min();
}

void SpanStore::clear_detail() {
  for (auto& lanes : devices_)
    for (auto& l : lanes) l.clear();
  history_.clear_fine();
  size_ = 0;
  end_ns_ = std::numeric_limits<std::int64_t>::min();
}

std::size_t SpanStore::held_bytes() const {
  std::size_t n = 0;
  for (const auto& lanes : devices_)
    for (const auto& l : lanes) n += l.held_bytes();
  return n;
}

const LaneSpans& SpanStore::lane(std::int32_t device, telemetry::Lane lane) const {
  static const LaneSpans kEmpty;
  const auto lane_index = static_cast<std::size_t>(lane);
  if (device < 0 || device >= device_count() || lane_index >= kLaneCount) return kEmpty;
  return devices_[static_cast<std::size_t>(device)][lane_index];
}

std::int64_t SpanStore::begin_ns() const {
  std::int64_t begin = std::numeric_limits<std::int64_t>::max();
  for (const auto& lanes : devices_)
    for (const auto& l : lanes)
      if (!l.empty()) begin = std::min(begin, l[0].start_ns);
  return begin == std::numeric_limits<std::int64_t>::max() ? 0 : begin;
}

void SpanStore::trim(std::int64_t cutoff_ns, std::size_t max_spans) {
  history_.trim_fine(cutoff_ns);
  for (auto& lanes : devices_) {
    for (auto& l : lanes) {
      const std::size_t n = l.drop_ended_before(cutoff_ns);
      size_ -= n;
      evicted_ += n;
    }
  }
  if (size_ <= max_spans) return;

  // Find the earliest start time t such that dropping every span starting before t leaves at most
  // max_spans: a bisection over time, each probe a binary search per lane.
  const std::size_t excess = size_ - max_spans;
  auto starting_before = [&](std::int64_t t) {
    std::size_t n = 0;
    for (const auto& lanes : devices_)
      for (const auto& l : lanes) n += l.first_starting_at_or_after(t);
    return n;
  };
  std::int64_t lo = begin_ns();
  std::int64_t hi = end_ns_ + 1;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (starting_before(mid) >= excess)
      hi = mid;
    else
      lo = mid + 1;
  }
  for (auto& lanes : devices_) {
    for (auto& l : lanes) {
      const std::size_t n = l.first_starting_at_or_after(lo);
      l.drop_front(n);
      size_ -= n;
      evicted_ += n;
    }
  }
}

}  // namespace sy::console
