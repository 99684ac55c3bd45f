// Level of detail for the timeline, after the Tracy profiler: spans narrower than a few pixels
// at the current zoom fold, with their narrow neighbours, into one marked block (up to a maximum
// width, so that a dense lane still shows where it stalled). Each output
// item costs a binary search, so a frame's cost follows the pixels on screen, not the spans held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "console/model/lane_spans.h"
#include "console/model/span_history.h"
#include "telemetry/events.h"

namespace sy::console {

struct TimelineItem {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::size_t first = 0;  // index of the first span in the lane
  std::size_t count = 1;  // spans it stands for: 1 is a single span, more is a fold
  telemetry::SpanKind kind = telemetry::SpanKind::Attention;  // a fold: most common among sampled members
  bool has_stall = false;  // a fold: a sampled member is a stall
  float stall_share = 0;   // a fold: share of the sampled members' time that is stalled
  telemetry::StallReason stall_reason = telemetry::StallReason::None;  // a fold: the most stalled-for reason
  // Drawn from window totals (reduced detail), not from spans: `first` means nothing, `count`
  // is the spans that started inside, the shares are exact over the windows.
  bool aggregate = false;
  float busy_share = 0;     // an aggregate: share of its time covered by work (not stalls)
  std::int64_t tokens = 0;  // an aggregate: token rows of its spans

  bool folded() const { return count > 1 || aggregate; }
};

struct FoldOptions {
  double ns_per_pixel = 1.0;
  double min_width_px = 3.0;  // narrower spans fold
  // A fold closes once it is this wide, so that a dense lane still shows where it stalled.
  double max_fold_px = 24.0;
  int fold_samples = 8;  // members inspected to colour a fold
};

// Appends to `out` the items that cover the spans of `lane` overlapping [t0_ns, t1_ns], in
// start order. Every such span is represented by exactly one item.
void fold_lane(const LaneSpans& lane, std::int64_t t0_ns, std::int64_t t1_ns, const FoldOptions& options,
               std::vector<TimelineItem>& out);

}  // namespace sy::console

namespace sy::console {

// Appends to `out` items for the windows of `series` inside [t0_ns, t1_ns], neighbouring windows
// grouped until an item is at least min_width_px wide (groups aligned to the series, so they do
// not shimmer while panning); empty windows draw nothing. Items are clipped to [t0_ns, t1_ns].
void fold_windows(const WindowSeries& series, std::int64_t t0_ns, std::int64_t t1_ns, const FoldOptions& options,
                  std::vector<TimelineItem>& out);

}  // namespace sy::console

namespace sy::console {

// The items of one lane over [t0_ns, t1_ns] at the detail held: its spans folded (fold_lane)
// where they are held and at most `max_spans` of them are in view, window totals elsewhere: the
// fine windows where they are held (unless the whole-run windows are as narrow as a fold), the
// whole-run windows elsewhere.
// This is how the timeline moves between a run's full detail and its reduced detail.
struct LaneDetail {
  const LaneSpans* spans = nullptr;
  const WindowSeries* fine = nullptr;
  const WindowSeries* coarse = nullptr;
};
// Lanes with more spans than this in view draw windows: it is less than their decode cache holds
// (24 chunks), so that a frame folding them decodes each chunk once, not at every frame.
inline constexpr std::size_t kMaxFoldedSpansInView = 16 * LaneSpans::kChunk;
void fold_lane_detail(const LaneDetail& lane, std::int64_t t0_ns, std::int64_t t1_ns, const FoldOptions& options,
                      std::vector<TimelineItem>& out, std::size_t max_spans = kMaxFoldedSpansInView);

}  // namespace sy::console
