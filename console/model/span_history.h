// Reduced detail of the spans, per device lane: totals over equal windows of run time (time by
// kind, stall time by reason, spans, tokens). A fine series (10 ms) covers what the live
// retention keeps; a coarse series (1 s, doubling when it grows past its cap) covers the whole
// run, so that the timeline can show an hour-long run at a glance and the full spans on zoom.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "telemetry/events.h"
#include "telemetry/span_windows.h"

namespace sy::console {

struct WindowTotals {
  std::int64_t spans = 0;
  std::int64_t tokens = 0;
  std::int64_t sampled_tokens = 0;  // of Sampler spans: tokens produced
  std::array<std::int64_t, telemetry::kSpanKinds> kind_ns{};
  std::array<std::int64_t, telemetry::kStallReasons> stall_ns{};

  std::int64_t stalled_ns() const { return kind_ns[static_cast<std::size_t>(telemetry::SpanKind::Stall)]; }
  std::int64_t busy_ns() const;
  bool empty() const;
  void add(const WindowTotals& o);
};

// Equal windows of one lane, aligned to multiples of the window length.
class WindowSeries {
 public:
  explicit WindowSeries(std::int64_t window_ns = 1'000'000'000) : window_ns_(window_ns) {}

  std::int64_t window_ns() const { return window_ns_; }
  std::size_t size() const { return windows_.size(); }
  bool empty() const { return windows_.empty(); }
  std::int64_t begin_ns() const { return origin_ns_; }
  std::int64_t end_ns() const { return origin_ns_ + static_cast<std::int64_t>(windows_.size()) * window_ns_; }
  // Window i starts at begin_ns() + i * window_ns().
  const WindowTotals& operator[](std::size_t i) const { return windows_[i]; }
  // Index of the window holding t (clamped to [0, size()]).
  std::size_t index_at(std::int64_t t) const;

  // A span's time goes to each window it crosses; it counts (spans, tokens) where it starts.
  // Returns false when it lies more than `max_windows` windows away from what is held.
  bool add(const telemetry::Span& s, std::size_t max_windows);
  // Totals of a window of exactly this series' length starting at `start_ns`.
  bool add(std::int64_t start_ns, const WindowTotals& totals, std::size_t max_windows);
  // Drops windows that end at or before `t_ns`.
  void drop_before(std::int64_t t_ns);
  // Merges neighbouring pairs: half the windows, each twice as long.
  void coarsen();
  void clear() { windows_.clear(); }
  std::size_t held_bytes() const { return windows_.size() * sizeof(WindowTotals); }

 private:
  WindowTotals* slot(std::int64_t t, std::size_t max_windows);

  std::int64_t window_ns_;
  std::int64_t origin_ns_ = 0;
  std::deque<WindowTotals> windows_;
};

class SpanHistory {
 public:
  static constexpr std::int64_t kFineWindowNs = 10'000'000;       // 10 ms
  static constexpr std::int64_t kCoarseWindowNs = 1'000'000'000;  // 1 s, the recorder's window
  // The coarse series doubles its window rather than grow past this (a day of 1 s windows).
  static constexpr std::size_t kMaxCoarseWindows = 86'400;

  // `coarse`: whether this span also goes into the whole-run series (not when that came from a
  // recording's windows).
  void add(const telemetry::Span& s, bool coarse = true);
  // A recording's window row into the whole-run series (its window must be a multiple of the
  // series' window, or equal to it).
  void add_window(const telemetry::SpanWindow& w);
  void trim_fine(std::int64_t cutoff_ns);
  void clear();
  void clear_fine();

  // nullptr when the lane has none.
  const WindowSeries* fine(std::int32_t device, telemetry::Lane lane) const;
  const WindowSeries* coarse(std::int32_t device, telemetry::Lane lane) const;
  std::int64_t coarse_window_ns() const { return coarse_window_ns_; }
  // The whole-run range the coarse series cover (0, 0 when none).
  std::int64_t begin_ns() const;
  std::int64_t end_ns() const;
  std::size_t held_bytes() const;

  // Totals of one device lane's whole-run windows that start in [t0, t1) (the compare table).
  WindowTotals totals(std::int32_t device, telemetry::Lane lane, std::int64_t t0, std::int64_t t1) const;

 private:
  struct Lanes {
    std::array<WindowSeries, 3> fine{WindowSeries(kFineWindowNs), WindowSeries(kFineWindowNs), WindowSeries(kFineWindowNs)};
    std::array<WindowSeries, 3> coarse{WindowSeries(kCoarseWindowNs), WindowSeries(kCoarseWindowNs),
                                       WindowSeries(kCoarseWindowNs)};
  };
  Lanes& lanes(std::int32_t device);
  void coarsen_all();

  std::vector<Lanes> devices_;
  std::int64_t coarse_window_ns_ = kCoarseWindowNs;
};

// The totals of a recording's window row.
WindowTotals totals_of(const telemetry::SpanWindow& w);

}  // namespace sy::console
