#include "console/views/charts_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <imgui.h>

#include "console/model/time_format.h"
#include "console/views/palette.h"
#include "console/views/plot.h"

namespace sy::console {
namespace {

using Getter = double (*)(const SummaryPoint&);

struct Series {
  const char* name;
  Getter get;
};

// One chart of summary series over [t0, t1]; hovering shows the values of the nearest window.
using Points = std::vector<const SummaryPoint*>;

void chart(const char* id, const char* title, const char* unit, ImVec2 size, const Points& pts,
           std::size_t first, std::size_t last, std::int64_t t0, std::int64_t t1, std::int64_t cursor,
           std::initializer_list<Series> series) {
  double peak = 0;
  for (std::size_t i = first; i < last; ++i)
    for (const Series& s : series) peak = std::max(peak, s.get(*pts[i]));
  ImGui::BeginGroup();
  const plot::Chart c = plot::begin_chart(id, title, size, t0, t1, peak, unit);
  int k = 0;
  for (const Series& s : series)
    plot::line(c, last - first, [&](std::size_t i) { return std::pair<std::int64_t, double>{pts[first + i]->t_end_ns, s.get(*pts[first + i])}; },
               palette::series(k++));
  plot::cursor_line(c, cursor, palette::kCursor);
  if (c.hovered && last > first) {
    const std::int64_t t = c.t_at(ImGui::GetIO().MousePos.x);
    std::size_t best = first;
    for (std::size_t i = first; i < last; ++i)
      if (std::llabs(pts[i]->t_end_ns - t) < std::llabs(pts[best]->t_end_ns - t)) best = i;
    const float x = c.x(pts[best]->t_end_ns);
    ImGui::GetWindowDrawList()->AddLine(ImVec2(x, c.min.y), ImVec2(x, c.max.y), IM_COL32(255, 255, 255, 60));
    ImGui::BeginTooltip();
    // A folded window of the run's older part is longer than the engine's: say how long.
    ImGui::Text("%s  window ending %s (%s)", title, format_time(pts[best]->t_end_ns, 1'000'000).c_str(),
                format_duration(pts[best]->t_end_ns - pts[best]->t_begin_ns).c_str());
    k = 0;
    for (const Series& s : series)
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette::series(k++)), "%-12s %.4g", s.name, s.get(*pts[best]));
    ImGui::EndTooltip();
  }
  if (series.size() > 1) {
    k = 0;
    for (const Series& s : series) plot::legend_item(palette::series(k++), s.name);
    ImGui::NewLine();
  }
  ImGui::EndGroup();
}

}  // namespace

void ChartsView::draw(const ConsoleModel& model, ViewState& state) {
  // The whole run: folded windows (summary_history.h) before the windows retention keeps.
  const Points pts = model.summary_points();
  if (pts.empty()) {
    ImGui::TextDisabled("no window summaries yet");
    return;
  }
  if (state.live) {
    static constexpr std::int64_t kWindows[] = {30'000'000'000, 60'000'000'000, 120'000'000'000, 600'000'000'000,
                                                3600'000'000'000};
    int w = 2;
    for (int i = 0; i < 5; ++i)
      if (kWindows[i] == state.chart_window_ns) w = i;
    ImGui::SetNextItemWidth(90);
    if (ImGui::Combo("window##charts", &w, "30 s\0 1 min\0 2 min\0 10 min\0 1 h\0")) state.chart_window_ns = kWindows[w];
    ImGui::SameLine();
  }
  {
    if (const SummaryPoint* p = model.summary_at(state.now(model))) {
      ImGui::TextDisabled("%s", describe_summary(*p).c_str());
    }
  }
  // Live: the chosen window up to the scrubber. A trace: the whole run, the scrubber marked.
  // (A run younger than the window fills it from its start.)
  const std::int64_t t1 = state.live ? std::max(state.now(model), model.begin_ns() + 1'000'000) : model.end_ns();
  const std::int64_t t0 = state.live ? std::max(t1 - state.chart_window_ns, model.begin_ns()) : model.begin_ns();
  auto first = static_cast<std::size_t>(
      std::lower_bound(pts.begin(), pts.end(), t0, [](const SummaryPoint* p, std::int64_t t) { return p->t_end_ns < t; }) -
      pts.begin());
  if (first > 0) --first;  // draw the line into the left edge
  const auto last = static_cast<std::size_t>(
      std::upper_bound(pts.begin(), pts.end(), t1, [](std::int64_t t, const SummaryPoint* p) { return t < p->t_end_ns; }) -
      pts.begin());

  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float legend_h = ImGui::GetTextLineHeightWithSpacing();
  const float w = std::max(160.0f, (avail.x - 8) / 2);
  const float h = std::max(72.0f, (avail.y - 3 * legend_h) / 3 - 6);
  const ImVec2 size(w - 4, h);
  const std::int64_t cursor = state.cursor_ns;

  chart("##tput", "throughput (tokens/s)", "", size, pts, first, last, t0, t1, cursor,
        {{"tokens/s", [](const SummaryPoint& p) { return p.tokens_per_s; }}});
  ImGui::SameLine();
  chart("##reqs", "requests", "", size, pts, first, last, t0, t1, cursor,
        {{"running", [](const SummaryPoint& p) { return static_cast<double>(p.running); }},
         {"waiting", [](const SummaryPoint& p) { return static_cast<double>(p.waiting); }},
         {"finished/s", [](const SummaryPoint& p) { return p.requests_per_s; }}});
  chart("##itl", "inter-token latency (ms)", "", size, pts, first, last, t0, t1, cursor,
        {{"p50", [](const SummaryPoint& p) { return p.itl_ms.p50; }},
         {"p90", [](const SummaryPoint& p) { return p.itl_ms.p90; }},
         {"p99", [](const SummaryPoint& p) { return p.itl_ms.p99; }}});
  ImGui::SameLine();
  chart("##ttft", "time to first token (ms)", "", size, pts, first, last, t0, t1, cursor,
        {{"p50", [](const SummaryPoint& p) { return p.ttft_ms.p50; }},
         {"p90", [](const SummaryPoint& p) { return p.ttft_ms.p90; }},
         {"p99", [](const SummaryPoint& p) { return p.ttft_ms.p99; }}});
  chart("##busy", "devices: mean busy and stall fractions", "", size, pts, first, last, t0, t1, cursor,
        {{"busy", [](const SummaryPoint& p) {
            double s = 0;
            for (const auto& d : p.devices) s += d.busy;
            return p.devices.empty() ? 0.0 : s / static_cast<double>(p.devices.size());
          }},
         {"barrier", [](const SummaryPoint& p) {
            double s = 0;
            for (const auto& d : p.devices) s += d.stall_barrier;
            return p.devices.empty() ? 0.0 : s / static_cast<double>(p.devices.size());
          }},
         {"queue empty", [](const SummaryPoint& p) {
            double s = 0;
            for (const auto& d : p.devices) s += d.stall_queue_empty;
            return p.devices.empty() ? 0.0 : s / static_cast<double>(p.devices.size());
          }},
         {"transfer", [](const SummaryPoint& p) {
            double s = 0;
            for (const auto& d : p.devices) s += d.stall_transfer;
            return p.devices.empty() ? 0.0 : s / static_cast<double>(p.devices.size());
          }}});
  ImGui::SameLine();
  chart("##kv", "KV usage, prefix cache hits and expert imbalance", "", size, pts, first, last, t0, t1, cursor,
        {{"kv usage", [](const SummaryPoint& p) { return p.kv_usage; }},
         {"prefix hit rate", [](const SummaryPoint& p) { return p.prefix_hit_rate(); }},
         {"max imbalance", [](const SummaryPoint& p) {
            double m = 0;
            for (double v : p.expert_imbalance) m = std::max(m, v);
            return m;
          }}});
}

}  // namespace sy::console
