#include "console/views/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "console/model/time_format.h"
#include "console/views/palette.h"

namespace sy::console::plot {

double nice_ceiling(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v * (1 - 1e-9)) return m * p;
  return 10 * p;
}

std::int64_t time_step(double ns_per_pixel, double min_px) {
  const double want = std::max(1.0, ns_per_pixel * min_px);
  const auto step = static_cast<std::int64_t>(nice_ceiling(want));
  return std::max<std::int64_t>(step, 1);
}

Chart begin_chart(const char* id, const char* title, ImVec2 size, std::int64_t t0, std::int64_t t1, double y_max,
                  const char* unit) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, size);
  Chart c;
  c.hovered = ImGui::IsItemHovered();
  const float line = ImGui::GetTextLineHeight();
  c.min = ImVec2(origin.x + 48, origin.y + line + 4);
  c.max = ImVec2(origin.x + size.x - 6, origin.y + size.y - line - 2);
  c.t0 = t0;
  c.t1 = std::max(t1, t0 + 1);
  c.y_max = nice_ceiling(y_max > 0 ? y_max * 1.05 : 1.0);

  elided_text(dl, ImVec2(origin.x + 4, origin.y), size.x - 8, palette::kText, title);
  dl->AddRectFilled(c.min, c.max, palette::kBackground);
  // y grid: 4 divisions.
  char buf[32];
  for (int i = 0; i <= 4; ++i) {
    const double v = c.y_max * i / 4.0;
    const float y = c.y(v);
    dl->AddLine(ImVec2(c.min.x, y), ImVec2(c.max.x, y), palette::kGrid);
    std::snprintf(buf, sizeof buf, "%s%s", format_count(v).c_str(), i == 4 ? unit : "");
    const ImVec2 ts = ImGui::CalcTextSize(buf);
    dl->AddText(ImVec2(c.min.x - ts.x - 4, y - ts.y / 2), palette::kTextDim, buf);
  }
  // Time ticks on the run's time base at a round step.
  const double ns_per_px = static_cast<double>(c.t1 - c.t0) / std::max(1.0f, c.max.x - c.min.x);
  const std::int64_t step = time_step(ns_per_px, 70);
  for (std::int64_t t = (c.t0 / step + (c.t0 > 0 ? 1 : 0)) * step; t <= c.t1; t += step) {
    if (t < c.t0) continue;
    const float x = c.x(t);
    dl->AddLine(ImVec2(x, c.max.y), ImVec2(x, c.max.y + 3), palette::kGrid);
    const std::string label = format_time(t, step);
    const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
    if (x + ts.x / 2 > c.max.x + 4) break;
    dl->AddText(ImVec2(std::max(c.min.x, x - ts.x / 2), c.max.y + 2), palette::kTextDim, label.c_str());
  }
  dl->AddRect(c.min, c.max, palette::kGrid);
  return c;
}

void cursor_line(const Chart& c, std::int64_t t, ImU32 colour) {
  if (t < c.t0 || t > c.t1) return;
  const float x = c.x(t);
  ImGui::GetWindowDrawList()->AddLine(ImVec2(x, c.min.y), ImVec2(x, c.max.y), colour);
}

bool elided_text(ImDrawList* dl, ImVec2 at, float max_width, ImU32 colour, const char* text) {
  const ImVec2 full = ImGui::CalcTextSize(text);
  if (full.x <= max_width) {
    dl->AddText(at, colour, text);
    return false;
  }
  // The longest prefix that fits beside the dots (binary search over bytes, kept on a UTF-8
  // character boundary).
  const std::string s = text;
  const float dots = ImGui::CalcTextSize("...").x;
  std::size_t lo = 0, hi = s.size();
  while (lo < hi) {
    const std::size_t mid = (lo + hi + 1) / 2;
    if (ImGui::CalcTextSize(s.c_str(), s.c_str() + mid).x + dots <= max_width) lo = mid;
    else hi = mid - 1;
  }
  while (lo > 0 && (static_cast<unsigned char>(s[lo]) & 0xC0) == 0x80) --lo;
  const std::string cut = s.substr(0, lo) + "...";
  dl->AddText(at, colour, cut.c_str());
  if (ImGui::IsMouseHoveringRect(at, ImVec2(at.x + max_width, at.y + full.y))) ImGui::SetTooltip("%s", text);
  return true;
}

void legend_item(ImU32 colour, const char* label) {
  const float h = ImGui::GetTextLineHeight();
  const float swatch = h - 4 + ImGui::GetStyle().ItemSpacing.x;
  const float text = ImGui::CalcTextSize(label).x;
  // Called after the previous entry's SameLine: wrap when this one does not fit what is left.
  const float line = ImGui::GetWindowContentRegionMax().x - ImGui::GetWindowContentRegionMin().x;
  if (ImGui::GetCursorPosX() > ImGui::GetWindowContentRegionMin().x + 1 && swatch + text > ImGui::GetContentRegionAvail().x)
    ImGui::NewLine();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + 3), ImVec2(p.x + h - 6, p.y + h - 3), colour);
  ImGui::Dummy(ImVec2(h - 4, h));
  ImGui::SameLine();
  const float room = std::max(h, line - swatch);
  if (text <= room) {
    ImGui::TextUnformatted(label);
  } else {
    const ImVec2 at = ImGui::GetCursorScreenPos();
    ImGui::Dummy(ImVec2(room, h));
    elided_text(ImGui::GetWindowDrawList(), at, room, palette::kText, label);
  }
  ImGui::SameLine(0, 14);
}

}  // namespace sy::console::plot
