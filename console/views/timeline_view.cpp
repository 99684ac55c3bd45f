#include "console/views/timeline_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <imgui.h>

#include "console/model/time_format.h"
#include "console/views/keys.h"
#include "console/views/palette.h"
#include "console/views/plot.h"
#include "telemetry/events.h"

namespace sy::console {
namespace {

using plot::px;
using telemetry::Lane;
using telemetry::Span;
using telemetry::SpanKind;

constexpr float kGutter = 118.0f;
constexpr float kRuler = 24.0f;
constexpr float kLaneHeight[kLaneCount] = {20.0f, 9.0f, 9.0f};
constexpr float kLaneGap = 1.0f;
constexpr float kRowGap = 6.0f;
constexpr std::int64_t kMinRangeNs = 200;
constexpr std::int64_t kMaxRangeNs = 24LL * 3600 * 1'000'000'000;

float row_height() {
  float h = kRowGap;
  for (float l : kLaneHeight) h += l + kLaneGap;
  return h;
}

// A short label drawn inside a wide span.
void span_label(const Span& s, char* buf, std::size_t size) {
  switch (s.kind) {
    case SpanKind::Attention: std::snprintf(buf, size, "attn b%d r%d  %lld", s.block, s.index, static_cast<long long>(s.tokens)); break;
    case SpanKind::Expert:
      if (s.index >= 0)
        std::snprintf(buf, size, "b%d e%d  %lld", s.block, s.index, static_cast<long long>(s.tokens));
      else
        std::snprintf(buf, size, "b%d experts  %lld", s.block, static_cast<long long>(s.tokens));
      break;
    case SpanKind::SharedExpert: std::snprintf(buf, size, "shared b%d  %lld", s.block, static_cast<long long>(s.tokens)); break;
    case SpanKind::Sampler: std::snprintf(buf, size, "sample  %lld", static_cast<long long>(s.tokens)); break;
    case SpanKind::Transfer:
      std::snprintf(buf, size, s.lane == Lane::Receive ? "<- %d  %lld" : "-> %d  %lld", s.peer, static_cast<long long>(s.tokens));
      break;
    case SpanKind::WeightFetch: std::snprintf(buf, size, "fetch b%d e%d", s.block, s.index); break;
    case SpanKind::Merge: std::snprintf(buf, size, "merge b%d  %lld", s.block, static_cast<long long>(s.tokens)); break;
    case SpanKind::Stall:
      std::snprintf(buf, size, "stall: %.*s", static_cast<int>(telemetry::stall_reason_name(s.stall_reason).size()),
                    telemetry::stall_reason_name(s.stall_reason).data());
      break;
  }
}

void span_tooltip(const Span& s, const RunMeta* meta) {
  const auto kind = telemetry::span_kind_name(s.kind);
  ImGui::BeginTooltip();
  ImGui::Text("%.*s", static_cast<int>(kind.size()), kind.data());
  if (s.kind == SpanKind::Stall) {
    const auto reason = telemetry::stall_reason_name(s.stall_reason);
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette::stall_reason(s.stall_reason)), "%.*s",
                       static_cast<int>(reason.size()), reason.data());
  }
  ImGui::Separator();
  const std::string device = meta != nullptr ? meta->device_name(s.device) : "dev " + std::to_string(s.device);
  const auto lane = telemetry::lane_name(s.lane);
  ImGui::Text("device    %s (%d), %.*s lane", device.c_str(), s.device, static_cast<int>(lane.size()), lane.data());
  if (s.block >= 0) ImGui::Text("block     %d", s.block);
  if (s.kind == SpanKind::Expert || s.kind == SpanKind::WeightFetch)
    ImGui::Text("expert    %s", s.index >= 0 ? std::to_string(s.index).c_str() : "several (grouped)");
  if (s.kind == SpanKind::Attention || s.kind == SpanKind::Sampler) ImGui::Text("rank      %d", s.index);
  if (s.microbatch >= 0) ImGui::Text("microbatch %d", s.microbatch);
  if (s.kind == SpanKind::Transfer) {
    const std::string peer = meta != nullptr ? meta->device_name(s.peer) : "dev " + std::to_string(s.peer);
    ImGui::Text("%s  %s (%d)", s.lane == Lane::Receive ? "from     " : "to       ", peer.c_str(), s.peer);
  }
  if (s.kind != SpanKind::Stall) ImGui::Text("tokens    %lld", static_cast<long long>(s.tokens));
  ImGui::Text("start     %s", format_time(s.start_ns, 1).c_str());
  ImGui::Text("duration  %s", format_duration(s.end_ns - s.start_ns).c_str());
  ImGui::EndTooltip();
}

void aggregate_tooltip(const TimelineItem& item) {
  ImGui::BeginTooltip();
  ImGui::Text("%zu spans in %s (window totals; zoom in for the spans)", item.count,
              format_duration(item.end_ns - item.start_ns).c_str());
  ImGui::Separator();
  ImGui::Text("busy      %.0f%%", 100.0 * item.busy_share);
  const auto kind = telemetry::span_kind_name(item.kind);
  ImGui::Text("mostly    %.*s", static_cast<int>(kind.size()), kind.data());
  if (item.has_stall) {
    const auto reason = telemetry::stall_reason_name(item.stall_reason);
    ImGui::Text("stalls    %.0f%% of the time accounted, mostly %.*s", 100.0 * item.stall_share,
                static_cast<int>(reason.size()), reason.data());
  }
  const double seconds = static_cast<double>(item.end_ns - item.start_ns) / 1e9;
  if (item.tokens > 0 && seconds > 0) ImGui::Text("tokens    %.0f rows/s", static_cast<double>(item.tokens) / seconds);
  ImGui::Text("from      %s", format_time(item.start_ns, 1000).c_str());
  ImGui::EndTooltip();
}

void fold_tooltip(const TimelineItem& item, const LaneSpans& lane) {
  if (item.aggregate) return aggregate_tooltip(item);
  ImGui::BeginTooltip();
  ImGui::Text("%zu spans folded (zoom in to see them)", item.count);
  ImGui::Separator();
  // Time actually busy inside the fold, counted only for moderately sized folds.
  if (item.count <= 20000) {
    std::int64_t busy = 0, stalled = 0;
    for (std::size_t i = item.first; i < item.first + item.count; ++i) {
      const auto& s = lane[i];
      (s.kind == SpanKind::Stall ? stalled : busy) += s.end_ns - s.start_ns;
    }
    const double range = static_cast<double>(std::max<std::int64_t>(1, item.end_ns - item.start_ns));
    ImGui::Text("busy      %.0f%%", 100.0 * static_cast<double>(busy) / range);
    if (stalled > 0) ImGui::Text("stalled   %.0f%%", 100.0 * static_cast<double>(stalled) / range);
  }
  const auto kind = telemetry::span_kind_name(item.kind);
  ImGui::Text("mostly    %.*s", static_cast<int>(kind.size()), kind.data());
  if (item.has_stall) {
    const auto reason = telemetry::stall_reason_name(item.stall_reason);
    ImGui::Text("stalls    about %.0f%% of the time sampled, mostly %.*s", 100.0 * item.stall_share,
                static_cast<int>(reason.size()), reason.data());
  }
  ImGui::Text("from      %s", format_time(item.start_ns, 1000).c_str());
  ImGui::Text("span      %s", format_duration(item.end_ns - item.start_ns).c_str());
  ImGui::EndTooltip();
}

constexpr SpanKind kLegendKinds[] = {SpanKind::Attention, SpanKind::Expert,   SpanKind::SharedExpert,
                                     SpanKind::Sampler,   SpanKind::Transfer, SpanKind::WeightFetch,
                                     SpanKind::Merge};

// Control-marker labels stack at most this many rows deep under the ruler; more would cover
// the first device's spans.
constexpr int kMarkerLabelRows = 3;

void legend() {
  for (SpanKind k : kLegendKinds) {
    const auto name = telemetry::span_kind_name(k);
    plot::legend_item(palette::span_kind(k), std::string(name).c_str());
  }
  for (auto r : {telemetry::StallReason::QueueEmpty, telemetry::StallReason::Barrier, telemetry::StallReason::Transfer,
                 telemetry::StallReason::Weights}) {
    const std::string name = "stall: " + std::string(telemetry::stall_reason_name(r));
    plot::legend_item(palette::stall_reason(r), name.c_str());
  }
  ImGui::NewLine();
}

}  // namespace

std::span<const SpanKind> TimelineView::legend_kinds() { return kLegendKinds; }

std::vector<int> TimelineView::marker_label_rows(const std::vector<LabelBox>& labels, int rows, float gap) {
  std::vector<int> row_of(labels.size(), -1);
  if (rows <= 0) return row_of;
  std::vector<std::size_t> order(labels.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return labels[a].left < labels[b].left; });
  // Taken left to right, a row is free for a label when the last label placed in it ends early enough.
  std::vector<float> row_end(static_cast<std::size_t>(rows), -std::numeric_limits<float>::infinity());
  for (std::size_t i : order) {
    for (int r = 0; r < rows; ++r) {
      if (row_end[static_cast<std::size_t>(r)] + gap <= labels[i].left) {
        row_of[i] = r;
        row_end[static_cast<std::size_t>(r)] = labels[i].left + labels[i].width;
        break;
      }
    }
  }
  return row_of;
}

void TimelineView::zoom(ViewState& state, std::int64_t anchor_ns, double factor) {
  const double t0 = static_cast<double>(state.view_t0_ns), t1 = static_cast<double>(state.view_t1_ns);
  const double a = static_cast<double>(anchor_ns);
  double n0 = a - (a - t0) * factor, n1 = a + (t1 - a) * factor;
  if (n1 - n0 < static_cast<double>(kMinRangeNs)) {
    const double mid = (n0 + n1) / 2;
    n0 = mid - kMinRangeNs / 2.0;
    n1 = mid + kMinRangeNs / 2.0;
  }
  if (n1 - n0 > static_cast<double>(kMaxRangeNs)) return;
  state.view_t0_ns = static_cast<std::int64_t>(std::llround(n0));
  state.view_t1_ns = static_cast<std::int64_t>(std::llround(n1));
  state.follow_live = false;
}

void TimelineView::pan(ViewState& state, std::int64_t delta_ns) {
  state.view_t0_ns += delta_ns;
  state.view_t1_ns += delta_ns;
  state.follow_live = false;
}

void TimelineView::fit(ViewState& state, const ConsoleModel& model) {
  const std::int64_t b = model.begin_ns(), e = model.end_ns();
  const std::int64_t pad = std::max<std::int64_t>((e - b) / 50, 1000);
  state.view_t0_ns = b - pad;
  state.view_t1_ns = std::max(e + pad, b + kMinRangeNs);
  state.follow_live = false;
}

void TimelineView::handle_keys(const ConsoleModel& model, ViewState& state) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput || !ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows)) return;
  const std::int64_t range = state.view_t1_ns - state.view_t0_ns;
  const std::int64_t mid = state.view_t0_ns + range / 2;
  const double fine = io.KeyShift ? 0.25 : 1.0;
  if (ImGui::IsKeyPressed('W') || ImGui::IsKeyPressed(keys::kPlus) || ImGui::IsKeyPressed(keys::kUp))
    zoom(state, mid, 1.0 - 0.3 * fine);
  if (ImGui::IsKeyPressed('S') || ImGui::IsKeyPressed(keys::kMinus) || ImGui::IsKeyPressed(keys::kDown))
    zoom(state, mid, 1.0 / (1.0 - 0.3 * fine));
  const auto step = static_cast<std::int64_t>(static_cast<double>(range) * 0.15 * fine);
  if (ImGui::IsKeyPressed('A') || ImGui::IsKeyPressed(keys::kLeft)) pan(state, -step);
  if (ImGui::IsKeyPressed('D') || ImGui::IsKeyPressed(keys::kRight)) pan(state, step);
  if (ImGui::IsKeyPressed(keys::kPageUp)) pan(state, -range);
  if (ImGui::IsKeyPressed(keys::kPageDown)) pan(state, range);
  if (ImGui::IsKeyPressed(keys::kHome) || ImGui::IsKeyPressed('F')) fit(state, model);
  if (ImGui::IsKeyPressed(keys::kEnd)) {
    if (state.live) {
      state.follow_live = true;
      state.cursor_ns = -1;
    } else {
      pan(state, model.end_ns() - state.view_t1_ns);
    }
  }
  if (ImGui::IsKeyPressed('C') && state.cursor_ns >= 0) pan(state, state.cursor_ns - mid);
}

void TimelineView::draw_ruler(const ConsoleModel& model, ViewState& state, float x0, float width) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float x_start = origin.x + x0;
  const double ns_per_px = static_cast<double>(state.view_t1_ns - state.view_t0_ns) / std::max(1.0f, width);
  const std::int64_t step = plot::time_step(ns_per_px, 110);
  const std::int64_t minor = plot::time_step(ns_per_px, 12);
  dl->AddRectFilled(origin, ImVec2(origin.x + x0 + width, origin.y + kRuler), palette::kRowAlt);
  const std::int64_t first = (state.view_t0_ns / minor) * minor;
  for (std::int64_t t = first; t <= state.view_t1_ns; t += minor) {
    if (t < state.view_t0_ns) continue;
    const float x = x_start + px(static_cast<double>(t - state.view_t0_ns) / ns_per_px);
    const bool major = t % step == 0;
    dl->AddLine(ImVec2(x, origin.y + kRuler - (major ? 9.0f : 4.0f)), ImVec2(x, origin.y + kRuler), palette::kGrid);
    if (major) {
      const std::string label = format_time(t, step);
      dl->AddText(ImVec2(x + 3, origin.y + 2), palette::kTextDim, label.c_str());
    }
  }
  // Range readout in the gutter.
  const std::string range = format_duration(state.view_t1_ns - state.view_t0_ns);
  dl->AddText(ImVec2(origin.x + 4, origin.y + 4), palette::kText, range.c_str());

  // Control command markers with hover labels.
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  for (const ControlEvent& e : model.control_events()) {
    if (e.t_ns < state.view_t0_ns || e.t_ns > state.view_t1_ns) continue;
    const float x = x_start + px(static_cast<double>(e.t_ns - state.view_t0_ns) / ns_per_px);
    const ImU32 c = e.ok ? palette::kControlMarker : palette::kControlError;
    dl->AddTriangleFilled(ImVec2(x - 5, origin.y + kRuler - 10), ImVec2(x + 5, origin.y + kRuler - 10),
                          ImVec2(x, origin.y + kRuler), c);
    if (std::fabs(mouse.x - x) < 6 && mouse.y >= origin.y && mouse.y < origin.y + kRuler) {
      ImGui::BeginTooltip();
      ImGui::Text("%s", e.label().c_str());
      ImGui::Text("at %s", format_time(e.t_ns, 1000).c_str());
      ImGui::TextDisabled("%s", e.request_json.c_str());
      ImGui::EndTooltip();
    }
  }
  ImGui::Dummy(ImVec2(x0 + width, kRuler));
}

void TimelineView::draw(const ConsoleModel& model, ViewState& state) {
  stats_ = {};
  const ImGuiIO& io = ImGui::GetIO();
  if (!initialised_ && (!model.spans().empty() || model.overview())) {
    // First data: show the last two seconds (live) or everything (a trace).
    if (state.live) {
      state.view_t0_ns = std::max(model.end_ns() - 2'000'000'000, model.begin_ns());
      state.view_t1_ns = state.view_t0_ns + 2'000'000'000;
    } else {
      fit(state, model);
    }
    initialised_ = true;
  }
  if (model.spans().empty() && model.end_ns() == 0 && !model.overview()) initialised_ = false;
  if (state.live && state.follow_live && model.end_ns() > 0) {
    // The newest data at the right edge; early in a run, the run's start at the left edge.
    const std::int64_t range = state.view_t1_ns - state.view_t0_ns;
    state.view_t0_ns = std::max(model.end_ns() - range, model.begin_ns());
    state.view_t1_ns = state.view_t0_ns + range;
  }
  handle_keys(model, state);

  // Header: legend and what is held.
  legend();
  {
    const std::string held = model.describe_held();
    ImGui::TextDisabled("%s", held.c_str());
    if (state.live) {
      ImGui::SameLine();
      bool follow = state.follow_live;
      if (ImGui::Checkbox("follow live (End)", &follow)) {
        state.follow_live = follow;
        if (follow) state.cursor_ns = -1;
      }
    }
    ImGui::SameLine();
    if (ImGui::SmallButton("fit (Home)")) fit(state, model);
  }

  const float width = std::max(50.0f, ImGui::GetContentRegionAvail().x - kGutter);
  draw_ruler(model, state, kGutter, width);

  // Rows in a scrolling child; the wheel zooms (shift+wheel scrolls the rows).
  ImGui::BeginChild("rows", ImVec2(0, 0), false, ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const std::int32_t devices = model.device_count();
  const float rh = row_height();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float content_h = std::max(rh * static_cast<float>(devices), ImGui::GetContentRegionAvail().y);
  ImGui::InvisibleButton("canvas", ImVec2(kGutter + width, content_h),
                         ImGuiButtonFlags_MouseButtonLeft | ImGuiButtonFlags_MouseButtonRight |
                             ImGuiButtonFlags_MouseButtonMiddle);
  const bool hovered = ImGui::IsItemHovered();
  const bool active = ImGui::IsItemActive();
  const float x_start = origin.x + kGutter;
  const double ns_per_px =
      static_cast<double>(state.view_t1_ns - state.view_t0_ns) / static_cast<double>(width);
  auto t_at = [&](float x) {
    return state.view_t0_ns + static_cast<std::int64_t>(static_cast<double>(x - x_start) * ns_per_px);
  };
  auto x_at = [&](std::int64_t t) { return x_start + px(static_cast<double>(t - state.view_t0_ns) / ns_per_px); };

  // Mouse: wheel zooms around the pointer, drag pans, shift-drag measures, double-click sets the cursor.
  if (hovered && io.MouseWheel != 0 && !io.KeyShift)
    zoom(state, t_at(io.MousePos.x), std::pow(0.8, static_cast<double>(io.MouseWheel)));
  if (hovered && io.MouseWheel != 0 && io.KeyShift) ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseWheel * rh);
  if (active && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && io.KeyShift) {
    measuring_ = true;
    measure_t0_ = measure_t1_ = t_at(io.MousePos.x);
  }
  if (measuring_) {
    if (ImGui::IsMouseDown(ImGuiMouseButton_Left))
      measure_t1_ = t_at(io.MousePos.x);
    else
      measuring_ = false;
  } else if (active && (io.MouseDelta.x != 0 || io.MouseDelta.y != 0)) {
    pan(state, -static_cast<std::int64_t>(static_cast<double>(io.MouseDelta.x) * ns_per_px));
    ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseDelta.y);
  }
  if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) state.cursor_ns = t_at(io.MousePos.x);

  const float visible_top = ImGui::GetWindowPos().y;
  const float visible_bottom = visible_top + ImGui::GetWindowSize().y;
  const RunMeta* meta = model.meta() ? &*model.meta() : nullptr;
  const FoldOptions fold{.ns_per_pixel = ns_per_px, .min_width_px = state.min_fold_px, .max_fold_px = 24, .fold_samples = 8};
  const float label_min_px = 40.0f;
  const SpanHistory& history = model.spans().history();
  char label[96];

  for (std::int32_t d = 0; d < devices; ++d) {
    const float row_y = origin.y + rh * static_cast<float>(d);
    if (row_y + rh < visible_top || row_y > visible_bottom) continue;
    if (d % 2 == 1) dl->AddRectFilled(ImVec2(origin.x, row_y), ImVec2(x_start + width, row_y + rh), palette::kRowAlt);
    // Gutter: device name and role.
    const std::string name = meta != nullptr ? meta->device_name(d) : "dev " + std::to_string(d);
    // Across processes each row says which one runs the device, and a dead one in red.
    const ProcessInfo* process = meta != nullptr && meta->processes.size() > 1 ? meta->process_of(d) : nullptr;
    const bool dead = process != nullptr && process->dead;
    dl->AddText(ImVec2(origin.x + 4, row_y + 3), dead ? palette::kControlError : palette::kText, name.c_str());
    if (process != nullptr) {  // on the name's line: the lines below hold the send/recv lane labels
      std::snprintf(label, sizeof label, dead ? "proc %d DEAD" : "proc %d", process->rank);
      dl->AddText(ImVec2(origin.x + 10 + ImGui::CalcTextSize(name.c_str()).x, row_y + 3),
                  dead ? palette::kControlError : palette::kTextDim, label);
    }
    if (const DeviceInfo* info = meta != nullptr ? meta->device(d) : nullptr) {
      std::snprintf(label, sizeof label, info->rank >= 0 ? "attn r%d" : "experts", info->rank);
      dl->AddText(ImVec2(origin.x + 4, row_y + 3 + ImGui::GetTextLineHeight()), palette::kTextDim, label);
    }
    if (process != nullptr &&
        ImGui::IsMouseHoveringRect(ImVec2(origin.x, row_y), ImVec2(x_start, row_y + rh)) && ImGui::IsWindowHovered()) {
      ImGui::BeginTooltip();
      ImGui::Text("%s runs in process %d (rank %d of %zu)", name.c_str(), process->rank, process->rank,
                  meta->processes.size());
      if (dead) ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "dead: %s", process->reason.c_str());
      if (process->clock_offset_us && process->clock_error_us)
        ImGui::Text("clock offset to rank 0: %+.1f us (residual error under %.1f us)", *process->clock_offset_us,
                    *process->clock_error_us);
      ImGui::EndTooltip();
    }

    float lane_y = row_y + kRowGap / 2;
    for (int l = 0; l < kLaneCount; ++l) {
      const float h = kLaneHeight[l];
      const LaneSpans& lane = model.spans().lane(d, static_cast<Lane>(l));
      items_.clear();
      const LaneDetail detail{&lane, history.fine(d, static_cast<Lane>(l)), history.coarse(d, static_cast<Lane>(l))};
      fold_lane_detail(detail, state.view_t0_ns, state.view_t1_ns, fold, items_);
      stats_.items += items_.size();
      const TimelineItem* hover = nullptr;
      const bool mouse_in_lane = hovered && io.MousePos.y >= lane_y && io.MousePos.y < lane_y + h;
      for (const TimelineItem& item : items_) {
        stats_.spans_in_view += item.count;
        const float xa = std::max(x_start, x_at(item.start_ns));
        const float xb = std::min(x_start + width, std::max(x_at(item.end_ns), xa + 1.0f));
        if (item.folded()) {
          ++stats_.folded_items;
          // Darker than a single span; tinted towards the colour of the reason it stalled for,
          // by the share of stalled time sampled inside (idle reads grey, barriers red).
          // Window totals keep the kind's own colour: they are a lane's time, not a pile of
          // narrow spans.
          const ImU32 c = palette::mix(palette::scale(palette::span_kind(item.kind), item.aggregate ? 1.0f : 0.6f),
                                       palette::scale(palette::stall_reason(item.stall_reason), 0.8f),
                                       item.stall_share);
          dl->AddRectFilled(ImVec2(xa, lane_y), ImVec2(xb, lane_y + h), c);
          // Tracy's fold marker: a zigzag along the block. Window totals (reduced detail) stay
          // flat, so that where the spans themselves are drawn reads at a glance.
          if (xb - xa >= 6 && h >= 12 && !item.aggregate) {
            const float mid = lane_y + h / 2;
            for (float x = xa; x + 3 <= xb; x += 6) {
              dl->AddLine(ImVec2(x, mid + 3), ImVec2(x + 3, mid - 3), palette::scale(c, 1.7f));
              if (x + 6 <= xb) dl->AddLine(ImVec2(x + 3, mid - 3), ImVec2(x + 6, mid + 3), palette::scale(c, 1.7f));
            }
          }
          if (xb - xa > 70 && h >= 14 && !item.aggregate) {
            std::snprintf(label, sizeof label, "%zu spans", item.count);
            const ImVec4 clip(xa + 2, lane_y, xb - 2, lane_y + h);
            dl->AddText(nullptr, 0, ImVec2(xa + 4, lane_y + (h - ImGui::GetTextLineHeight()) / 2), palette::kText,
                        label, nullptr, 0, &clip);
          }
        } else {
          const Span& s = lane[item.first];
          const ImU32 c = palette::span(s);
          if (s.kind == SpanKind::Stall) {
            // Stalls: a hollow box in the reason's colour, so idle time reads as idle.
            dl->AddRectFilled(ImVec2(xa, lane_y + h * 0.3f), ImVec2(xb, lane_y + h * 0.7f), palette::scale(c, 0.55f));
            dl->AddRect(ImVec2(xa, lane_y), ImVec2(xb, lane_y + h), c);
          } else {
            dl->AddRectFilled(ImVec2(xa, lane_y), ImVec2(xb, lane_y + h), c);
            if (xb - xa > 3) dl->AddLine(ImVec2(xa, lane_y), ImVec2(xa, lane_y + h), palette::scale(c, 0.6f));
          }
          if (xb - xa > label_min_px && h >= 14) {
            span_label(s, label, sizeof label);
            const ImVec4 clip(xa + 2, lane_y, xb - 2, lane_y + h);
            dl->AddText(nullptr, 0, ImVec2(xa + 4, lane_y + (h - ImGui::GetTextLineHeight()) / 2),
                        s.kind == SpanKind::Stall ? palette::kText : IM_COL32(15, 15, 20, 255), label, nullptr, 0, &clip);
          }
        }
        if (mouse_in_lane && io.MousePos.x >= xa - 1 && io.MousePos.x < xb + 1) hover = &item;
      }
      if (hover != nullptr && !active) {
        dl->AddRect(ImVec2(std::max(x_start, x_at(hover->start_ns)) - 1, lane_y - 1),
                    ImVec2(std::min(x_start + width, std::max(x_at(hover->end_ns), x_at(hover->start_ns) + 1)) + 1,
                           lane_y + h + 1),
                    IM_COL32(255, 255, 255, 220));
        if (hover->folded())
          fold_tooltip(*hover, lane);
        else
          span_tooltip(lane[hover->first], meta);
      }
      if (h < 14 && (mouse_in_lane || d == 0)) {
        // Name the thin lanes at the right edge of the gutter.
        const char* lane_name = l == 1 ? "send" : "recv";
        const ImVec2 ts = ImGui::CalcTextSize(lane_name);
        if (ts.y <= h + 6)
          dl->AddText(ImVec2(x_start - ts.x - 4, lane_y + (h - ts.y) / 2), palette::kTextDim, lane_name);
      }
      lane_y += h + kLaneGap;
    }
  }

  // Overlays: control markers, the scrubber cursor, the live edge and a measurement.
  const float top = std::max(origin.y, visible_top), bottom = std::min(origin.y + content_h, visible_bottom);
  {
    struct Marker {
      float x;
      ImU32 colour;
      std::string text;
    };
    std::vector<Marker> markers;
    std::vector<LabelBox> boxes;
    for (const ControlEvent& e : model.control_events()) {
      if (e.t_ns < state.view_t0_ns || e.t_ns > state.view_t1_ns) continue;
      Marker m{x_at(e.t_ns), e.ok ? palette::kControlMarker : palette::kControlError, e.label()};
      boxes.push_back({m.x + 4, ImGui::CalcTextSize(m.text.c_str()).x});
      markers.push_back(std::move(m));
    }
    const float line = ImGui::GetTextLineHeight();
    const int rows = std::clamp(static_cast<int>((bottom - top - 2) / line), 0, kMarkerLabelRows);
    // A label without a row is left out; the marker's triangle in the ruler names it on hover.
    const std::vector<int> row = marker_label_rows(boxes, rows, 8.0f);
    for (std::size_t i = 0; i < markers.size(); ++i) {
      const Marker& m = markers[i];
      for (float y = top; y < bottom; y += 8) dl->AddLine(ImVec2(m.x, y), ImVec2(m.x, std::min(y + 4, bottom)), m.colour);
      if (row[i] >= 0) dl->AddText(ImVec2(boxes[i].left, top + 2 + line * static_cast<float>(row[i])), m.colour, m.text.c_str());
    }
  }
  if (state.cursor_ns >= state.view_t0_ns && state.cursor_ns <= state.view_t1_ns) {
    const float x = x_at(state.cursor_ns);
    dl->AddLine(ImVec2(x, top), ImVec2(x, bottom), palette::kCursor, 1.5f);
  }
  if (measuring_ || measure_t0_ != measure_t1_) {
    const float a = x_at(std::min(measure_t0_, measure_t1_)), b = x_at(std::max(measure_t0_, measure_t1_));
    dl->AddRectFilled(ImVec2(std::max(a, x_start), top), ImVec2(std::min(b, x_start + width), bottom), palette::kSelection);
    const std::string text = format_duration(static_cast<std::int64_t>(std::llabs(measure_t1_ - measure_t0_)));
    dl->AddText(ImVec2(std::max(a, x_start) + 4, bottom - ImGui::GetTextLineHeight() - 4), palette::kText, text.c_str());
    if (!measuring_ && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && hovered && !io.KeyShift)
      measure_t0_ = measure_t1_ = 0;
  }
  if (hovered && !active) {
    // A hairline and the time under the pointer.
    dl->AddLine(ImVec2(io.MousePos.x, top), ImVec2(io.MousePos.x, bottom), IM_COL32(255, 255, 255, 40));
  }
  // Device rows scrolled out of view are named, so that none is missed.
  {
    int above = 0, below = 0;
    for (std::int32_t d = 0; d < devices; ++d) {
      const float row_y = origin.y + rh * static_cast<float>(d);
      if (row_y < visible_top - 0.5f) ++above;
      else if (row_y + rh > visible_bottom + 0.5f) ++below;
    }
    stats_.rows_above = above;
    stats_.rows_below = below;
    auto note = [&](const std::string& text, float y) {
      const ImVec2 size = ImGui::CalcTextSize(text.c_str());
      const ImVec2 at(ImGui::GetWindowPos().x + ImGui::GetWindowSize().x - size.x - 12, y);
      dl->AddRectFilled(ImVec2(at.x - 4, at.y - 1), ImVec2(at.x + size.x + 4, at.y + size.y + 1), palette::kRowAlt);
      dl->AddText(at, palette::kText, text.c_str());
    };
    if (above > 0) note(std::to_string(above) + (above == 1 ? " device row above" : " device rows above"), visible_top + 2);
    if (below > 0)
      note(std::to_string(below) + (below == 1 ? " device row below" : " device rows below") +
               " (shift+wheel or drag scrolls)",
           visible_bottom - ImGui::GetTextLineHeight() - 4);
  }
  ImGui::EndChild();
}

}  // namespace sy::console
