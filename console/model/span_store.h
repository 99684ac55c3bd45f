// Every span the console holds, per device and lane, with the retention that bounds a live run's
// memory (a time window and a span budget) and counts of what was dropped and why; beside them
// the reduced detail of the whole run (span_history.h), which retention never drops.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "console/model/lane_spans.h"
#include "console/model/span_history.h"
#include "telemetry/events.h"

namespace sy::console {

inline constexpr int kLaneCount = 3;  // compute, send, receive

class SpanStore {
 public:
  // Spans with a device index outside [0, kMaxDevices) are refused (counted as rejected).
  static constexpr std::int32_t kMaxDevices = 4096;

  // Returns false (and counts it) for a span that names no plausible device or lane, or ends
  // before it starts.
  bool add(const telemetry::Span& span);
  void clear();
  // Drops the spans and the fine windows, keeps the whole-run windows (a recording's detail
  // being replaced by another range of it).
  void clear_detail();
  // Whether added spans also build the whole-run windows (not when those came from a
  // recording's SPAN_WINDOWS).
  void set_history_from_spans(bool on) { history_from_spans_ = on; }
  const SpanHistory& history() const { return history_; }
  SpanHistory& history() { return history_; }
  // Bytes the spans take (compressed chunks and open records).
  std::size_t held_bytes() const;

  // Live retention: drops spans that ended before `cutoff_ns`; then, if more than `max_spans`
  // remain, drops the earliest-starting ones across all lanes until at most `max_spans` are left.
  void trim(std::int64_t cutoff_ns, std::size_t max_spans = std::numeric_limits<std::size_t>::max());

  std::int32_t device_count() const { return static_cast<std::int32_t>(devices_.size()); }
  const LaneSpans& lane(std::int32_t device, telemetry::Lane lane) const;
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Earliest start and latest end held (0, 0 when empty).
  std::int64_t begin_ns() const;
  std::int64_t end_ns() const { return empty() ? 0 : end_ns_; }

  std::uint64_t evicted() const { return evicted_; }
  std::uint64_t rejected() const { return rejected_; }

 private:
  std::vector<std::array<LaneSpans, kLaneCount>> devices_;
  SpanHistory history_;
  bool history_from_spans_ = true;
  std::size_t size_ = 0;
  std::int64_t end_ns_ = std::numeric_limits<std::int64_t>::min();
  std::uint64_t evicted_ = 0;
  std::uint64_t rejected_ = 0;
};

}  // namespace sy::console
