#include "console/views/queue_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <imgui.h>

#include "console/model/time_format.h"
#include "console/views/palette.h"
#include "console/views/plot.h"

namespace sy::console {
namespace {

using plot::px;

const char* layer_short(telemetry::LayerKind k) {
  switch (k) {
    case telemetry::LayerKind::Attention: return "attn";
    case telemetry::LayerKind::Expert: return "exp";
    case telemetry::LayerKind::Sampler: return "sampler";
  }
  return "?";
}

// The rows of the held samples, and those only the whole-run history still knows (a recording
// read by its overview: its devices before any zoom).
std::vector<QueueRow> queue_rows(const ConsoleModel& model, QueueGrouping grouping) {
  std::vector<QueueRow> rows = model.queues().rows(grouping);
  auto same_row = [&](const QueueKey& a, const QueueKey& b) {
    if (grouping == QueueGrouping::Device) return a.device == b.device;
    return a.device == b.device && a.layer == b.layer && a.block == b.block;
  };
  for (const QueueKey& k : model.queue_history().row_keys(grouping)) {
    if (std::none_of(rows.begin(), rows.end(), [&](const QueueRow& r) { return same_row(r.first, k); }))
      rows.push_back({k, {}});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const QueueRow& a, const QueueRow& b) {
    return std::tie(a.first.device, a.first.layer, a.first.block) < std::tie(b.first.device, b.first.layer, b.first.block);
  });
  return rows;
}

std::string history_note(const ConsoleModel& model, QueueGrouping grouping, std::int64_t held0, std::int64_t held1) {
  std::string held = held1 <= held0 ? "no samples held"
                                    : (held0 == std::numeric_limits<std::int64_t>::min()
                                           ? std::string("samples held")
                                           : "samples held from " + format_time(held0, 1'000'000));
  if (held1 > held0 && held1 != std::numeric_limits<std::int64_t>::max())
    held += " to " + format_time(held1, 1'000'000);
  std::string note = "; " + held + ", the rest from whole-run windows of " +
                     format_duration(QueueHistory::kWindowNs);
  if (model.overview())
    note += " (the recording keeps each device's mean only: rows by device, cell mean)";
  else if (grouping == QueueGrouping::DeviceBlock)
    note += " (peak: of each row's total)";
  return note;
}

}  // namespace

std::string queue_row_label(const QueueRow& row, QueueGrouping grouping, const RunMeta* meta) {
  const QueueKey& k = row.first;
  const std::string dev = meta != nullptr ? meta->device_name(k.device) : "dev " + std::to_string(k.device);
  char buf[128];
  switch (grouping) {
    case QueueGrouping::EachQueue:
      if (k.layer == telemetry::LayerKind::Expert)
        std::snprintf(buf, sizeof buf, "%s exp b%d e%d", dev.c_str(), k.block, k.index);
      else
        std::snprintf(buf, sizeof buf, "%s %s b%d r%d", dev.c_str(), layer_short(k.layer), k.block, k.index);
      break;
    // A row only the whole-run history knows has no members held: no count to give.
    case QueueGrouping::DeviceBlock:
      if (row.members.empty())
        std::snprintf(buf, sizeof buf, "%s %s b%d", dev.c_str(), layer_short(k.layer), k.block);
      else
        std::snprintf(buf, sizeof buf, "%s %s b%d (%zu)", dev.c_str(), layer_short(k.layer), k.block, row.members.size());
      break;
    case QueueGrouping::Device:
      if (row.members.empty())
        std::snprintf(buf, sizeof buf, "%s", dev.c_str());
      else
        std::snprintf(buf, sizeof buf, "%s (%zu queues)", dev.c_str(), row.members.size());
      break;
  }
  return buf;
}

void QueueView::draw(const ConsoleModel& model, ViewState& state) {
  const RunMeta* meta = model.meta() ? &*model.meta() : nullptr;
  // Controls.
  {
    int g = static_cast<int>(state.queue_grouping);
    ImGui::SetNextItemWidth(120);
    if (ImGui::Combo("rows", &g, "each queue\0device x block\0device\0")) state.queue_grouping = static_cast<QueueGrouping>(g);
    ImGui::SameLine();
    // Past the samples retention keeps, the heatmap reads the whole-run history (queue_history.h).
    static constexpr std::int64_t kWindows[] = {1'000'000'000,   5'000'000'000,   10'000'000'000,    30'000'000'000,
                                                60'000'000'000,  120'000'000'000, 600'000'000'000,   3'600'000'000'000,
                                                ViewState::kWholeRun};
    constexpr int kChoices = static_cast<int>(sizeof kWindows / sizeof kWindows[0]);
    int w = 2;
    for (int i = 0; i < kChoices; ++i)
      if (kWindows[i] == state.queue_window_ns) w = i;
    ImGui::SetNextItemWidth(90);
    if (ImGui::Combo("window", &w, "1 s\0 5 s\0 10 s\0 30 s\0 60 s\0 120 s\0 10 min\0 1 h\0whole run\0"))
      state.queue_window_ns = kWindows[w];
    ImGui::SameLine();
    int m = static_cast<int>(state.queue_bin_mode);
    ImGui::SetNextItemWidth(70);
    if (ImGui::Combo("cell", &m, "mean\0peak\0")) state.queue_bin_mode = static_cast<BinMode>(m);
    if (!state.selected_queues.empty()) {
      ImGui::SameLine();
      if (ImGui::SmallButton("clear selection")) state.selected_queues.clear();
    }
  }

  // The window ends at the scrubber; a run younger than the window fills it from its start.
  const std::int64_t t1 = std::max(state.now(model), model.begin_ns() + 1'000'000);
  const std::int64_t t0 = state.queue_window_ns == ViewState::kWholeRun
                              ? model.begin_ns()
                              : std::max(t1 - state.queue_window_ns, model.begin_ns());
  // A recording read by its overview, before any zoom, holds no samples and only per-device
  // windows: its rows are the devices, whatever the selector says (the note says so).
  const QueueGrouping grouping =
      model.queues().queue_count() == 0 && model.queue_history().row_keys(QueueGrouping::DeviceBlock).empty()
          ? QueueGrouping::Device
          : state.queue_grouping;
  const auto rows = queue_rows(model, grouping);
  const auto [held0, held1] = model.queue_samples_held();
  const QueueHistory& history = model.queue_history();
  // Whether any of the window lies outside the held samples and so is drawn from the history.
  const bool from_history = grouping != QueueGrouping::EachQueue && (t0 < held0 || t1 > held1) &&
                            history.end_ns() > t0 && history.begin_ns() < t1;
  if (rows.empty()) {
    ImGui::TextDisabled("no queue samples yet");
    return;
  }

  // Heatmap cells.
  const float label_w = std::clamp(ImGui::GetContentRegionAvail().x * 0.3f, 90.0f, 150.0f);
  const float plot_h = state.selected_queues.empty() ? 0.0f : 170.0f;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float map_w = std::max(40.0f, avail.x - label_w - 8);
  const int bins = std::clamp(static_cast<int>(map_w / 3.0f), 8, 300);
  grid_.resize(rows.size());
  double max_v = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    grid_[r].assign(static_cast<std::size_t>(bins), 0.0);
    for (const QueueKey& k : rows[r].members)
      model.queues().accumulate_bins(k, t0, t1, state.queue_bin_mode, grid_[r], held0, held1);
    // Mean: the history's share of each bin adds to the samples'; peak: the larger of the two.
    history.accumulate_bins(grouping, rows[r].first, t0, t1, state.queue_bin_mode, held0, held1, grid_[r]);
    for (double v : grid_[r]) max_v = std::max(max_v, v);
  }
  // Wrapped rather than cut off in a narrow dock.
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
  ImGui::TextWrapped("%zu rows, %s to %s; colour scale 0 .. %s tokens (%s)%s", rows.size(),
                     format_time(t0, 1'000'000).c_str(), format_time(t1, 1'000'000).c_str(),
                     format_count(max_v).c_str(), state.queue_bin_mode == BinMode::Mean ? "time-weighted mean" : "peak",
                     from_history ? history_note(model, grouping, held0, held1).c_str() : "");
  ImGui::PopStyleColor();

  const float map_h = std::max(60.0f, ImGui::GetContentRegionAvail().y - plot_h - 6);
  ImGui::BeginChild("heatmap", ImVec2(0, map_h), false);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float row_h = std::clamp((map_h - 4) / static_cast<float>(rows.size()), 3.0f, 16.0f);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("cells", ImVec2(label_w + map_w, row_h * static_cast<float>(rows.size())));
  const bool hovered = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked(ImGuiMouseButton_Left);
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const float cell_w = map_w / static_cast<float>(bins);
  const float top = ImGui::GetWindowPos().y, bottom = top + ImGui::GetWindowSize().y;
  std::int32_t last_device = -1;
  float last_label_y = -1e9f;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const float y = origin.y + row_h * static_cast<float>(r);
    if (y + row_h < top || y > bottom) continue;
    const bool selected = std::any_of(rows[r].members.begin(), rows[r].members.end(),
                                      [&](const QueueKey& k) { return state.selected_queues.count(k) > 0; });
    const bool room = row_h >= ImGui::GetTextLineHeight() - 2;
    if ((room || rows[r].first.device != last_device) && y >= last_label_y + ImGui::GetTextLineHeight() - 2) {
      last_label_y = y;
      // Rows too thin for their own label are named by device at the device's first row.
      const std::string label = room ? queue_row_label(rows[r], grouping, meta)
                                     : (meta != nullptr ? meta->device_name(rows[r].first.device)
                                                        : "dev " + std::to_string(rows[r].first.device));
      const ImVec4 clip(origin.x, y, origin.x + label_w - 4, y + std::max(row_h, ImGui::GetTextLineHeight()));
      dl->AddText(nullptr, 0, ImVec2(origin.x + 2, y), selected ? palette::kCursor : palette::kTextDim, label.c_str(),
                  nullptr, 0, &clip);
    }
    if (rows[r].first.device != last_device && r > 0)
      dl->AddLine(ImVec2(origin.x, y), ImVec2(origin.x + label_w + map_w, y), palette::kGrid);
    last_device = rows[r].first.device;
    // Cells quantised to 48 levels and merged into runs: far fewer rectangles than cells. The
    // colour follows the square root of depth, so shallow queues still show against empty ones.
    constexpr int kLevels = 48;
    auto level = [&](int b) {
      const double v = grid_[r][static_cast<std::size_t>(b)];
      return v <= 0 || max_v <= 0 ? -1 : std::min(kLevels - 1, static_cast<int>(v / max_v * kLevels));
    };
    for (int b = 0; b < bins;) {
      const int lv = level(b);
      int e = b + 1;
      while (e < bins && level(e) == lv) ++e;
      if (lv >= 0) {
        const float xa = origin.x + label_w + cell_w * static_cast<float>(b);
        const float xb = origin.x + label_w + cell_w * static_cast<float>(e);
        dl->AddRectFilled(ImVec2(xa, y), ImVec2(xb, y + row_h - (row_h > 5 ? 1.0f : 0.0f)),
                          palette::heat(std::sqrt((lv + 0.5) / kLevels)));
      }
      b = e;
    }
    if (selected) dl->AddRect(ImVec2(origin.x + label_w, y), ImVec2(origin.x + label_w + map_w, y + row_h), palette::kCursor);
    if (hovered && mouse.y >= y && mouse.y < y + row_h) {
      const int b = static_cast<int>((mouse.x - origin.x - label_w) / cell_w);
      ImGui::BeginTooltip();
      ImGui::Text("%s", queue_row_label(rows[r], grouping, meta).c_str());
      if (b >= 0 && b < bins) {
        const std::int64_t bin_ns = (t1 - t0) / bins;
        ImGui::Text("%s .. %s", format_time(t0 + bin_ns * b, 1'000'000).c_str(),
                    format_time(t0 + bin_ns * (b + 1), 1'000'000).c_str());
        ImGui::Text("depth %.1f tokens (%s)", grid_[r][static_cast<std::size_t>(b)],
                    state.queue_bin_mode == BinMode::Mean ? "mean" : "peak");
      }
      ImGui::TextDisabled("click: %s the line plot", selected ? "remove from" : "add to");
      ImGui::EndTooltip();
      if (clicked) {
        for (const QueueKey& k : rows[r].members) {
          if (selected)
            state.selected_queues.erase(k);
          else if (state.selected_queues.size() < 64)
            state.selected_queues.insert(k);
        }
      }
    }
  }
  ImGui::EndChild();

  // Line plot of the selected queues (each member of a selected row).
  if (!state.selected_queues.empty()) {
    const int points = std::clamp(static_cast<int>(map_w / 2.0f), 16, 600);
    std::vector<std::vector<double>> series;
    double peak = 0;
    for (const QueueKey& k : state.selected_queues) {
      series.emplace_back(static_cast<std::size_t>(points), 0.0);
      model.queues().accumulate_bins(k, t0, t1, BinMode::Max, series.back());
      for (double v : series.back()) peak = std::max(peak, v);
    }
    const plot::Chart c = plot::begin_chart("##queue_lines", "selected queues (peak depth, tokens)",
                                            ImVec2(avail.x, plot_h - 22), t0, t1, peak, " tok");
    const std::int64_t step = (t1 - t0) / points;
    int i = 0;
    for (const auto& s : series) {
      plot::line(c, s.size(), [&](std::size_t j) { return std::pair<std::int64_t, double>{t0 + step * static_cast<std::int64_t>(j), s[j]}; },
                 palette::series(i++));
    }
    i = 0;
    for (const QueueKey& k : state.selected_queues) {
      if (i >= 8) {
        ImGui::TextDisabled("+%zu more", state.selected_queues.size() - 8);
        break;
      }
      const std::string label = queue_row_label({k, {k}}, QueueGrouping::EachQueue, meta);
      plot::legend_item(palette::series(i++), label.c_str());
    }
    ImGui::NewLine();
  }
}

}  // namespace sy::console
