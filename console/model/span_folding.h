// Level of detail for the timeline, after the Tracy profiler: spans narrower than a few pixels
// at the current zoom fold, with their narrow neighbours, into one marked block (up to a maximum
// width, so that a dense lane still shows where it stalled). Each output
// item costs a binary search, so a frame's cost follows the pixels on screen, not the spans held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "console/model/lane_spans.h"
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

  bool folded() const { return count > 1; }
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
