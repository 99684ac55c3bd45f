// Per-device, per-lane totals of spans over fixed windows of run time (time by span kind, stall
// time by reason, spans, tokens, time-integrated queue depth): the reduced detail that a
// recording's overview (the trace's SPAN_WINDOWS table), the console's whole-run history and
// `trace compare` are drawn from.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "telemetry/events.h"

namespace sy::telemetry {

inline constexpr std::size_t kStallReasons = 5;

struct SpanWindow {
  std::int64_t start_ns = 0;
  std::int64_t window_ns = 0;
  std::int32_t device = 0;
  Lane lane = Lane::Compute;
  std::int64_t spans = 0;          // spans that start inside the window
  std::int64_t tokens = 0;         // token rows of those spans (executions; transfers on their lanes)
  std::int64_t sampled_tokens = 0; // tokens of Sampler spans among them (one per sequence sampled): tokens produced
  // Time covered by each kind inside the window: a span crossing a window edge is split.
  std::array<std::int64_t, kSpanKinds> kind_ns{};
  std::array<std::int64_t, kStallReasons> stall_ns{};  // Stall time by reason (index = StallReason)
  // Compute lane only: the integral over the window of the tokens queued on the device (all of
  // its μ-queues, from queue samples), in token·ns; divided by window_ns it is the mean depth.
  std::int64_t queue_token_ns = 0;

  std::int64_t end_ns() const { return start_ns + window_ns; }
  std::int64_t stalled_ns() const { return kind_ns[static_cast<std::size_t>(SpanKind::Stall)]; }
  // Time covered by anything but stalls (on a lane whose spans overlap, more than the window).
  std::int64_t busy_ns() const;
  // Adds `other`'s totals (same device and lane; any window).
  void merge(const SpanWindow& other);
};

// Builds windows from spans and queue samples that arrive roughly in time order. Windows stay
// open until close_before() passes them; a record for a window already closed opens it again,
// so a reader must sum rows of the same (device, lane, start) — docs/trace-schema.md says so.
class SpanWindowAccumulator {
 public:
  explicit SpanWindowAccumulator(std::int64_t window_ns = 1'000'000'000);

  std::int64_t window_ns() const { return window_ns_; }
  void add(const Span& s);
  void add(const QueueSample& q);
  // The latest time seen (a span's end, a sample's time).
  std::int64_t latest_ns() const { return latest_ns_; }
  // Moves the windows that end at or before `t_ns` to `out`, ordered by (start, device, lane).
  void close_before(std::int64_t t_ns, std::vector<SpanWindow>& out);
  // Moves every window to `out`, queue depths integrated up to latest_ns().
  void close_all(std::vector<SpanWindow>& out);
  bool empty() const { return open_.empty(); }

 private:
  SpanWindow& window(std::int64_t start, std::int32_t device, Lane lane);
  void integrate_queue(std::int32_t device, std::int64_t t_ns);

  struct QueueState {
    std::int64_t last_t = 0;
    bool started = false;
    std::int64_t total = 0;
    std::map<std::tuple<int, std::int32_t, std::int32_t>, std::int64_t> depth;  // (layer, block, index)
  };

  std::int64_t window_ns_;
  std::int64_t latest_ns_ = 0;
  std::map<std::tuple<std::int64_t, std::int32_t, int>, SpanWindow> open_;
  std::map<std::int32_t, QueueState> queues_;
};

// The start of the window of `window_ns` that holds `t` (floor, also for negative times).
std::int64_t window_start(std::int64_t t, std::int64_t window_ns);

}  // namespace sy::telemetry
