// Small plotting helpers drawn with ImDrawList (ImPlot is not in Debian): chart frames with time
// and value axes, line series, a time ruler with nice tick steps, and tooltips.
#pragma once

#include <cstdint>
#include <string>

#include <imgui.h>

namespace sy::console::plot {

inline float px(double v) { return static_cast<float>(v); }

// 1, 2 or 5 times a power of ten, at least `v`.
double nice_ceiling(double v);
// A tick step in ns (1/2/5 x 10^k) giving labels at least `min_px` apart.
std::int64_t time_step(double ns_per_pixel, double min_px);

// A chart's plotting area and its mapping from (time, value) to pixels.
struct Chart {
  ImVec2 min, max;  // plotting area (inside the axes)
  std::int64_t t0 = 0, t1 = 1;
  double y_max = 1;
  bool hovered = false;
  float x(std::int64_t t) const {
    return min.x + px(static_cast<double>(t - t0) / static_cast<double>(t1 - t0)) * (max.x - min.x);
  }
  float y(double v) const { return max.y - px(v / y_max) * (max.y - min.y); }
  std::int64_t t_at(float x_px) const {
    return t0 + static_cast<std::int64_t>(static_cast<double>(x_px - min.x) / static_cast<double>(max.x - min.x) *
                                          static_cast<double>(t1 - t0));
  }
};

// Reserves `size` in the current window, draws title, frame, y grid with labels in `unit`, and
// time ticks on the run's time base. y_max is rounded up to a nice value.
Chart begin_chart(const char* id, const char* title, ImVec2 size, std::int64_t t0, std::int64_t t1, double y_max,
                  const char* unit);
// A vertical line at t (the scrubber), if inside.
void cursor_line(const Chart& chart, std::int64_t t, ImU32 colour);

// Draws a line through `n` points given by point(i) -> (t_ns, value), skipping NaN values.
template <class PointFn>
void line(const Chart& c, std::size_t n, PointFn point, ImU32 colour, float thickness = 1.5f) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PushClipRect(c.min, c.max, true);
  bool open = false;
  ImVec2 prev;
  for (std::size_t i = 0; i < n; ++i) {
    const auto [t, v] = point(i);
    if (v != v) {  // NaN: a gap
      open = false;
      continue;
    }
    const ImVec2 p(c.x(t), c.y(v));
    if (open) dl->AddLine(prev, p, colour, thickness);
    prev = p;
    open = true;
  }
  dl->PopClipRect();
}

// A legend entry: a colour swatch and its label on the current line, or on the next when the
// line is full; a label wider than the whole line is cut with "..." and shown whole on hover.
void legend_item(ImU32 colour, const char* label);

// Draws `text` at `at`, cut with "..." to fit `max_width` pixels; the whole text shows as a
// tooltip while the pointer is over a cut one. Returns whether it was cut.
bool elided_text(ImDrawList* dl, ImVec2 at, float max_width, ImU32 colour, const char* text);

}  // namespace sy::console::plot
