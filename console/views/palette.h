// Colours of the console's views: one per span kind and stall reason (the timeline's legend), and
// the heat scales of the queue and skew heatmaps.
#pragma once

#include <cstdint>

#include <imgui.h>

#include "telemetry/events.h"

namespace sy::console::palette {

ImU32 span_kind(telemetry::SpanKind kind);
ImU32 stall_reason(telemetry::StallReason reason);
// The colour a span is drawn with: its kind, a stall's reason, experts shaded by expert id so
// that neighbouring executions of different experts read apart.
ImU32 span(const telemetry::Span& span);
// 0..1 -> dark blue .. yellow (sequential, for depths and token counts).
ImU32 heat(double x);
// Ratio to the mean: < 1 blue, 1 grey, > 1 red, saturating at 1/4 and 4.
ImU32 ratio(double r);
// Distinct colours for series in line plots.
ImU32 series(int i);
ImU32 scale(ImU32 colour, float factor);  // brightness
ImU32 mix(ImU32 a, ImU32 b, double t);    // a at 0, b at 1

inline constexpr ImU32 kBackground = IM_COL32(22, 24, 28, 255);
inline constexpr ImU32 kRowAlt = IM_COL32(30, 32, 38, 255);
inline constexpr ImU32 kGrid = IM_COL32(60, 64, 72, 255);
inline constexpr ImU32 kText = IM_COL32(220, 222, 228, 255);
inline constexpr ImU32 kTextDim = IM_COL32(140, 144, 152, 255);
inline constexpr ImU32 kCursor = IM_COL32(255, 210, 60, 255);
inline constexpr ImU32 kControlMarker = IM_COL32(120, 200, 255, 255);
inline constexpr ImU32 kControlError = IM_COL32(255, 90, 90, 255);
inline constexpr ImU32 kSelection = IM_COL32(120, 170, 255, 60);

}  // namespace sy::console::palette
