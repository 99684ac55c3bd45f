#include "console/views/skew_view.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include <imgui.h>

#include "console/model/time_format.h"
#include "console/views/palette.h"
#include "console/views/plot.h"

namespace sy::console {
namespace {

std::string device_list(const std::vector<std::int32_t>& devices, const RunMeta* meta) {
  std::string out;
  for (std::int32_t d : devices) {
    if (!out.empty()) out += ", ";
    out += meta != nullptr ? meta->device_name(d) : std::to_string(d);
  }
  return out;
}

// Horizontal bars with a label column; returns the hovered index or -1.
int bars(const char* id, const std::vector<std::string>& labels, const std::vector<double>& values, double max_v,
         float width, float bar_h, ImU32 (*colour)(double)) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float label_w = 64.0f;
  const float h = bar_h * static_cast<float>(values.size());
  ImGui::InvisibleButton(id, ImVec2(width, std::max(h, 1.0f)));
  const bool hovered = ImGui::IsItemHovered();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  int hover = -1;
  const float bar_w = std::max(10.0f, width - label_w - 50);
  char buf[32];
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float y = origin.y + bar_h * static_cast<float>(i);
    if (bar_h >= ImGui::GetTextLineHeight() - 3)
      dl->AddText(ImVec2(origin.x, y), palette::kTextDim, labels[i].c_str());
    const float w = max_v > 0 ? plot::px(values[i] / max_v) * bar_w : 0;
    dl->AddRectFilled(ImVec2(origin.x + label_w, y + 1), ImVec2(origin.x + label_w + w, y + bar_h - 1), colour(values[i]));
    if (bar_h >= ImGui::GetTextLineHeight() - 3) {
      std::snprintf(buf, sizeof buf, "%.2f", values[i]);
      dl->AddText(ImVec2(origin.x + label_w + w + 4, y), palette::kText, buf);
    }
    if (hovered && mouse.y >= y && mouse.y < y + bar_h) hover = static_cast<int>(i);
  }
  return hover;
}

ImU32 imbalance_colour(double r) { return palette::ratio(r); }
ImU32 load_colour(double) { return palette::span_kind(telemetry::SpanKind::Expert); }

}  // namespace

void SkewView::draw(const ConsoleModel& model, ViewState& state) {
  const RunMeta* meta = model.meta() ? &*model.meta() : nullptr;
  const std::int64_t now = state.now(model);
  // Older than the load windows held, the history's folded window (longer) stands in.
  const LoadWindow* w = state.cursor_ns >= 0 ? model.load_at(now) : model.loads().latest();
  if (w == nullptr) {
    ImGui::TextDisabled("no expert-load window yet");
    return;
  }
  if (w != window_ || w->start_ns != window_start_ || w->end_ns != window_end_ || model.version() != version_) {
    analysis_ = analyze_skew(*w, meta);
    window_ = w;
    window_start_ = w->start_ns;
    window_end_ = w->end_ns;
    version_ = model.version();
  }
  const SkewAnalysis& a = analysis_;
  if (a.blocks <= 0 || a.experts <= 0) {
    ImGui::TextDisabled("the window holds no usable records");
    return;
  }
  ImGui::Text("window %s .. %s  (%s)", format_time(a.window_start_ns, 1'000'000).c_str(),
              format_time(a.window_end_ns, 1'000'000).c_str(), format_duration(a.window_end_ns - a.window_start_ns).c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("  %s tokens routed, device imbalance %.2f", format_count(static_cast<double>(a.total_tokens)).c_str(),
                      a.device_imbalance);

  // Wide: heatmap left, device load and hottest experts right. Narrow: one above the other.
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const bool wide = avail.x >= 560;
  const float side_w = wide ? std::clamp(avail.x * 0.38f, 220.0f, 360.0f) : avail.x;
  const float map_w = wide ? std::max(60.0f, avail.x - side_w - 12) : avail.x;
  const float map_h = wide ? 0.0f : std::max(120.0f, avail.y * 0.55f);

  // The heatmap with the per-block imbalance bars beside it.
  ImGui::BeginChild("skew_map", ImVec2(map_w, map_h), false);
  {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float imb_w = std::min(150.0f, map_w * 0.3f);
    const float label_w = 34.0f;
    const float grid_w = std::max(20.0f, map_w - imb_w - label_w - 8);
    const float header = ImGui::GetTextLineHeight() + 2;
    const float cell_h = std::clamp((ImGui::GetContentRegionAvail().y - header - 4) / static_cast<float>(a.blocks), 2.0f, 18.0f);
    const float cell_w = grid_w / static_cast<float>(a.experts);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("cells", ImVec2(label_w + grid_w, header + cell_h * static_cast<float>(a.blocks)));
    const bool hovered = ImGui::IsItemHovered();
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    dl->AddText(ImVec2(o.x, o.y), palette::kTextDim, "blk");
    char buf[32];
    for (std::int32_t e = 0; e < a.experts; ++e) {
      if (cell_w < 14 && e % std::max(1, static_cast<int>(14 / cell_w) + 1) != 0) continue;
      std::snprintf(buf, sizeof buf, "%d", e);
      dl->AddText(ImVec2(o.x + label_w + cell_w * static_cast<float>(e) + 1, o.y), palette::kTextDim, buf);
    }
    for (std::int32_t b = 0; b < a.blocks; ++b) {
      const float y = o.y + header + cell_h * static_cast<float>(b);
      if (cell_h >= ImGui::GetTextLineHeight() - 3 || b % 4 == 0) {
        std::snprintf(buf, sizeof buf, "%d", b);
        dl->AddText(ImVec2(o.x, y), palette::kTextDim, buf);
      }
      std::int64_t sum = 0;
      for (std::int32_t e = 0; e < a.experts; ++e) sum += a.at(b, e);
      const double mean = static_cast<double>(sum) / a.experts;
      for (std::int32_t e = 0; e < a.experts; ++e) {
        const float x = o.x + label_w + cell_w * static_cast<float>(e);
        const double ratio = mean > 0 ? static_cast<double>(a.at(b, e)) / mean : 0;
        dl->AddRectFilled(ImVec2(x, y), ImVec2(x + cell_w - (cell_w > 4 ? 1.0f : 0.0f), y + cell_h - (cell_h > 4 ? 1.0f : 0.0f)),
                          palette::ratio(ratio));
        if (hovered && mouse.x >= x && mouse.x < x + cell_w && mouse.y >= y && mouse.y < y + cell_h) {
          ImGui::BeginTooltip();
          ImGui::Text("block %d, expert %d", b, e);
          ImGui::Text("%lld tokens, %.2fx the block mean", static_cast<long long>(a.at(b, e)), ratio);
          if (meta != nullptr && static_cast<std::size_t>(b) < meta->placement.size() &&
              static_cast<std::size_t>(e) < meta->placement[static_cast<std::size_t>(b)].size())
            ImGui::Text("replicas on %s", device_list(meta->placement[static_cast<std::size_t>(b)][static_cast<std::size_t>(e)], meta).c_str());
          ImGui::EndTooltip();
        }
      }
    }
    // Imbalance per block, aligned with the rows.
    ImGui::SameLine();
    ImGui::BeginGroup();
    ImGui::TextDisabled("max/mean");
    std::vector<std::string> labels(static_cast<std::size_t>(a.blocks));
    const double max_imb = *std::max_element(a.block_imbalance.begin(), a.block_imbalance.end());
    ImGui::SetCursorScreenPos(ImVec2(ImGui::GetCursorScreenPos().x, o.y + header));
    const int h = bars("block_imbalance", labels, a.block_imbalance, std::max(max_imb, 1.0), imb_w, cell_h, imbalance_colour);
    if (h >= 0) ImGui::SetTooltip("block %d: the hottest expert got %.2fx the mean", h, a.block_imbalance[static_cast<std::size_t>(h)]);
    ImGui::EndGroup();
  }
  ImGui::EndChild();

  // Per-device load and the hottest experts.
  if (wide) ImGui::SameLine();
  ImGui::BeginChild("skew_side", ImVec2(0, 0), false);
  {
    ImGui::Text("tokens per device (x1000)");
    std::vector<std::string> labels;
    std::vector<double> values;
    double max_v = 0;
    for (std::int32_t d = 0; d < a.devices; ++d) {
      const std::int64_t t = a.device_tokens[static_cast<std::size_t>(d)];
      const DeviceInfo* info = meta != nullptr ? meta->device(d) : nullptr;
      if (t == 0 && info != nullptr && info->rank >= 0) continue;  // attention-only device
      labels.push_back(meta != nullptr ? meta->device_name(d) : "dev " + std::to_string(d));
      values.push_back(static_cast<double>(t) / 1000.0);
      max_v = std::max(max_v, values.back());
    }
    bars("device_load", labels, values, max_v, ImGui::GetContentRegionAvail().x, ImGui::GetTextLineHeight() + 2, load_colour);
    ImGui::Spacing();
    ImGui::Text("hottest experts");
    if (ImGui::BeginTable("hot", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_SizingStretchProp)) {
      ImGui::TableSetupColumn("block/expert");
      ImGui::TableSetupColumn("tokens");
      ImGui::TableSetupColumn("x mean");
      ImGui::TableSetupColumn("on");
      ImGui::TableHeadersRow();
      for (const HotExpert& h : a.hottest) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("b%d e%d", h.block, h.expert);
        ImGui::TableNextColumn();
        ImGui::Text("%lld", static_cast<long long>(h.tokens));
        ImGui::TableNextColumn();
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette::ratio(h.vs_block_mean)), "%.2f", h.vs_block_mean);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(device_list(h.devices, meta).c_str());
      }
      ImGui::EndTable();
    }
  }
  ImGui::EndChild();
}

}  // namespace sy::console
