#include "console/views/device_view.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <imgui.h>

#include "console/model/device_activity.h"
#include "console/model/time_format.h"
#include "console/views/palette.h"
#include "console/views/plot.h"

namespace sy::console {
namespace {

constexpr std::int64_t kRanges[] = {1'000'000'000, 5'000'000'000, 30'000'000'000, 120'000'000'000, 0};

telemetry::StallReason reason_of(const std::string& name) {
  if (name == "barrier") return telemetry::StallReason::Barrier;
  if (name == "transfer") return telemetry::StallReason::Transfer;
  if (name == "weights") return telemetry::StallReason::Weights;
  return telemetry::StallReason::QueueEmpty;
}

double stall_share(const DeviceActivity& d, const std::string& name) {
  if (name == "queue_empty") return d.stall_queue_empty;
  if (name == "barrier") return d.stall_barrier;
  if (name == "transfer") return d.stall_transfer;
  if (name == "weights") return d.stall_weights;
  if (name == "host") return d.host();
  return 0;
}

void row(const DeviceActivity& d, const char* label, bool group) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  if (group)
    ImGui::TextColored(ImVec4(0.85f, 0.85f, 1.0f, 1.0f), "%s", label);
  else
    ImGui::TextUnformatted(label);
  ImGui::TableNextColumn();
  ImGui::Text("%.0f%%", 100 * d.busy);
  ImGui::TableNextColumn();
  const std::string stall = d.main_idle();
  if (stall.empty()) {
    ImGui::TextDisabled("-");
  } else {
    // Host time has no span of its own (nothing was recorded then): a colour apart from the stalls'.
    const ImU32 colour = stall == "host" ? IM_COL32(120, 150, 200, 255) : palette::stall_reason(reason_of(stall));
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colour), "%s %.0f%%", stall.c_str(), 100 * stall_share(d, stall));
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("queue_empty %.1f%%  barrier %.1f%%  transfer %.1f%%  weights %.1f%%  host %.1f%%",
                        100 * d.stall_queue_empty, 100 * d.stall_barrier, 100 * d.stall_transfer,
                        100 * d.stall_weights, 100 * d.host());
  }
  ImGui::TableNextColumn();
  ImGui::Text("%.0f", d.executions_per_s);
  ImGui::TableNextColumn();
  ImGui::Text("%.1f", d.rows_per_execution);
  const auto traffic = [&](const char* format, double v) {
    ImGui::TableNextColumn();
    if (d.has_traffic)
      ImGui::Text(format, v);
    else
      ImGui::TextDisabled("n/a");
  };
  traffic("%.0f", d.transfers_per_s);
  traffic("%.1f", d.rows_per_transfer);
  traffic("%.2f", d.queue_wait_mean_ms);
  traffic("%.2f", d.queue_wait_max_ms);
}

}  // namespace

void DeviceView::draw(const ConsoleModel& model, ViewState& state) {
  // The whole run: folded windows (summary_history.h) before the windows retention keeps.
  const std::vector<const SummaryPoint*> pts = model.summary_points();
  if (pts.empty()) {
    ImGui::TextDisabled("no window summaries yet");
    return;
  }
  ImGui::SetNextItemWidth(90);
  ImGui::Combo("range##devices", &range_, "last 1 s\0last 5 s\0last 30 s\0last 2 min\0whole run\0");
  const std::int64_t t1 = state.now(model);
  const std::int64_t span = kRanges[std::clamp(range_, 0, 4)];
  const std::int64_t t0 = span > 0 ? t1 - span : std::numeric_limits<std::int64_t>::min();
  const RunMeta* meta = model.meta() ? &*model.meta() : nullptr;
  // A window ends after t when it contains it: take the one holding the scrubber too.
  const SummaryPoint* at = model.summary_at(t1);
  const ActivityTable table = device_activity(pts, meta, t0, at ? at->t_end_ns : t1);
  ImGui::SameLine();
  if (table.windows == 0) {
    ImGui::TextDisabled("no window summary ends in this range");
    return;
  }
  ImGui::TextDisabled("%d windows, %s to %s  (?)", table.windows, format_time(table.t0_ns, 1'000'000).c_str(),
                      format_time(table.t1_ns, 1'000'000).c_str());
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Few rows per execution at many executions per second is batch fragmentation: an execution\n"
        "of a small batch costs about what a full one does (the weights are read either way).\n"
        "sends: shipments to other devices; wait: how long the oldest row of each batch taken\n"
        "from a μ-queue had waited there (head-of-line queueing delay). Busy and the stalls leave\n"
        "host time (in a stall's tooltip): on the cpu and cuda backends the dispatch latency between\n"
        "the engine's loop and the device, before an execution starts and after it ends.");

  constexpr int kColumns = 9;
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_Resizable | ImGuiTableFlags_Hideable |
                                ImGuiTableFlags_SizingFixedFit;
  // The chart needs room to read; in a short pane the table keeps it all.
  const float avail_h = ImGui::GetContentRegionAvail().y;
  const bool with_chart = avail_h >= 280;
  const float chart_h = with_chart ? std::max(120.0f, avail_h * 0.35f) : 0.0f;
  if (ImGui::BeginTable("devices", kColumns, flags,
                        ImVec2(0, std::max(80.0f, ImGui::GetContentRegionAvail().y - chart_h - 8)))) {
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("device", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("busy");
    ImGui::TableSetupColumn("stall");
    ImGui::TableSetupColumn("exec/s");
    ImGui::TableSetupColumn("rows/exec");
    ImGui::TableSetupColumn("sends/s");
    ImGui::TableSetupColumn("rows/send");
    ImGui::TableSetupColumn("wait ms");
    ImGui::TableSetupColumn("max ms");
    ImGui::TableHeadersRow();
    for (const ActivityGroup& g : table.groups) {
      const std::string label = g.label + " mean (" + std::to_string(g.devices) + ")";
      row(g.mean, label.c_str(), true);
    }
    for (const DeviceActivity& d : table.devices) row(d, d.name.c_str(), false);
    ImGui::EndTable();
  }

  if (!with_chart) return;
  // Rows per execution over the range, attention and expert devices: fragmentation over time.
  const std::int64_t c0 = std::max(table.t0_ns, pts.front()->t_begin_ns);
  const std::int64_t c1 = std::max(table.t1_ns, c0 + 1);
  std::vector<std::pair<std::string, std::vector<std::pair<std::int64_t, double>>>> series;
  // Which devices are attention ranks, as the table found them (no lookup per window).
  std::vector<std::int32_t> attention_devices;
  for (const DeviceActivity& d : table.devices)
    if (d.attention) attention_devices.push_back(d.device);
  const auto is_attention = [&](std::int32_t device) {
    return std::find(attention_devices.begin(), attention_devices.end(), device) != attention_devices.end();
  };
  series.emplace_back("attention", std::vector<std::pair<std::int64_t, double>>{});
  series.emplace_back(meta ? "expert" : "all devices", std::vector<std::pair<std::int64_t, double>>{});
  double peak = 0;
  for (const SummaryPoint* point : pts) {
    const SummaryPoint& p = *point;
    if (p.t_end_ns < c0 || p.t_end_ns > c1) continue;
    double rows[2] = {0, 0}, execs[2] = {0, 0};
    for (const DeviceWindow& w : p.devices) {
      const int k = is_attention(w.device) ? 0 : 1;
      rows[k] += w.rows_per_execution * static_cast<double>(w.executions);
      execs[k] += static_cast<double>(w.executions);
    }
    for (int k = 0; k < 2; ++k) {
      const double v = execs[k] > 0 ? rows[k] / execs[k] : std::numeric_limits<double>::quiet_NaN();
      series[static_cast<std::size_t>(k)].second.emplace_back(p.t_end_ns, v);
      if (v == v) peak = std::max(peak, v);
    }
  }
  const ImVec2 size(std::max(160.0f, ImGui::GetContentRegionAvail().x - 4), chart_h - 2 * ImGui::GetTextLineHeight());
  const plot::Chart c = plot::begin_chart("##rowsexec", "rows per execution", size, c0, c1, std::max(1.0, peak), "");
  int k = 0;
  for (const auto& [name, points] : series) {
    if (!points.empty())
      plot::line(c, points.size(), [&](std::size_t i) { return points[i]; }, palette::series(k));
    ++k;
  }
  plot::cursor_line(c, t1, palette::kCursor);
  k = 0;
  for (const auto& [name, points] : series) {
    if (meta || k > 0) plot::legend_item(palette::series(k), name.c_str());
    ++k;
  }
  ImGui::NewLine();
}

}  // namespace sy::console
