// The timeline: one row per device with compute, send and receive lanes; spans coloured by kind,
// stalls by reason; narrow spans folded into marked blocks (level of detail); control commands
// as markers; zoom and pan with mouse and keyboard, hover for details, shift-drag to measure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "console/model/console_model.h"
#include "console/model/span_folding.h"
#include "console/views/view_state.h"
#include "telemetry/events.h"

namespace sy::console {

class TimelineView {
 public:
  struct FrameStats {
    std::size_t items = 0;          // rectangles drawn
    std::size_t folded_items = 0;
    std::size_t spans_in_view = 0;  // spans those items stand for
    int rows_above = 0, rows_below = 0;  // device rows not wholly in view (the view says so)
  };

  // Draws into the current ImGui window, filling the remaining content region.
  void draw(const ConsoleModel& model, ViewState& state);
  const FrameStats& last_frame() const { return stats_; }

  // Zoom by `factor` (< 1 zooms in) around time `anchor_ns`; used by keys, wheel and tests.
  static void zoom(ViewState& state, std::int64_t anchor_ns, double factor);
  static void pan(ViewState& state, std::int64_t delta_ns);
  static void fit(ViewState& state, const ConsoleModel& model);

  // The span kinds the legend names: every kind drawn in a colour of its own (stalls are named
  // by their reasons instead).
  static std::span<const telemetry::SpanKind> legend_kinds();

  // A control marker's label: its left edge and width in pixels.
  struct LabelBox {
    float left = 0, width = 0;
  };
  // The row (0 at the top) for each label: the first row where it clears, by `gap` pixels, the
  // labels already there (taken left to right); -1 where none of `rows` has room. Labels at
  // nearby markers would otherwise be drawn over each other and read as neither.
  static std::vector<int> marker_label_rows(const std::vector<LabelBox>& labels, int rows, float gap);

 private:
  void handle_keys(const ConsoleModel& model, ViewState& state);
  void draw_ruler(const ConsoleModel& model, ViewState& state, float x0, float width);

  std::vector<TimelineItem> items_;
  FrameStats stats_;
  bool measuring_ = false;
  std::int64_t measure_t0_ = 0, measure_t1_ = 0;
  bool initialised_ = false;
};

}  // namespace sy::console
