#include "console/views/request_table_view.h"

#include <algorithm>
#include <string>

#include <imgui.h>

#include "console/model/time_format.h"

namespace sy::console {
namespace {

using telemetry::RequestPhase;

const char* state_name(const RequestRow& r) {
  switch (r.phase) {
    case RequestPhase::Arrival: return "waiting";
    case RequestPhase::Admitted: return "prefill";
    case RequestPhase::FirstToken: return "decoding";
    case RequestPhase::Finished: return "finished";
    case RequestPhase::Rejected: return "rejected";
  }
  return "?";
}

bool passes(const RequestRow& r, int filter) {
  switch (filter) {
    case 1: return r.phase == RequestPhase::Arrival;
    case 2: return r.phase == RequestPhase::Admitted || r.phase == RequestPhase::FirstToken;
    case 3: return r.phase == RequestPhase::Finished;
    case 4: return r.phase == RequestPhase::Rejected;
    default: return true;
  }
}

std::int64_t key(const RequestRow& r, int column) {
  switch (column) {
    case 0: return r.id;
    case 1: return static_cast<std::int64_t>(r.phase);
    case 2: return r.rank;
    case 3: return r.tokens_in;
    case 4: return r.tokens_out;
    case 5: return r.arrival_ns;
    case 6: return r.ttft_ns();
    case 7: return r.mean_itl_ns();
    case 8: return r.finished_ns == RequestRow::kNever || r.arrival_ns == RequestRow::kNever ? RequestRow::kNever
                                                                                              : r.finished_ns - r.arrival_ns;
    default: return r.id;
  }
}

std::string maybe(std::int64_t ns) { return ns == RequestRow::kNever ? std::string("-") : format_duration(ns); }

}  // namespace

void RequestTableView::draw(const ConsoleModel& model, ViewState&) {
  const RequestTable& table = model.requests();
  ImGui::SetNextItemWidth(120);
  if (ImGui::Combo("show", &filter_, "all\0waiting\0running\0finished\0rejected\0")) dirty_ = true;
  ImGui::SameLine();
  ImGui::TextDisabled("%zu requests held (%zu waiting, %zu finished, %zu rejected)", table.size(),
                      table.count(RequestPhase::Arrival), table.count(RequestPhase::Finished),
                      table.count(RequestPhase::Rejected));

  constexpr int kColumns = 9;
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_Resizable | ImGuiTableFlags_Reorderable |
                                ImGuiTableFlags_Hideable | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("requests", kColumns, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("id", ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_PreferSortDescending);
  ImGui::TableSetupColumn("state");
  ImGui::TableSetupColumn("rank");
  ImGui::TableSetupColumn("in");
  ImGui::TableSetupColumn("out");
  ImGui::TableSetupColumn("arrival");
  ImGui::TableSetupColumn("TTFT");
  ImGui::TableSetupColumn("ITL mean");
  ImGui::TableSetupColumn("latency");
  ImGui::TableHeadersRow();

  if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs != nullptr && specs->SpecsDirty) {
    if (specs->SpecsCount > 0) {
      sort_column_ = specs->Specs[0].ColumnIndex;
      sort_ascending_ = specs->Specs[0].SortDirection == ImGuiSortDirection_Ascending;
    }
    specs->SpecsDirty = false;
    dirty_ = true;
  }
  const auto now = std::chrono::steady_clock::now();
  const bool stale = version_ != table.version() && now - sorted_at_ > std::chrono::milliseconds(250);
  if (dirty_ || stale) {
    std::vector<const RequestRow*> rows;
    for (const auto& [id, row] : table.rows())
      if (passes(row, filter_)) rows.push_back(&row);
    const int column = sort_column_;
    const bool ascending = sort_ascending_;
    std::stable_sort(rows.begin(), rows.end(), [column, ascending](const RequestRow* a, const RequestRow* b) {
      const std::int64_t ka = key(*a, column), kb = key(*b, column);
      if (ka != kb) return ascending ? ka < kb : ka > kb;
      return a->id > b->id;
    });
    order_.clear();
    for (const RequestRow* r : rows) order_.push_back(r->id);
    version_ = table.version();
    dirty_ = false;
    sorted_at_ = now;
  }

  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(order_.size()));
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      auto it = table.rows().find(order_[static_cast<std::size_t>(i)]);
      ImGui::TableNextRow();
      if (it == table.rows().end()) {  // dropped since the last sort
        ImGui::TableNextColumn();
        ImGui::TextDisabled("%lld (gone)", static_cast<long long>(order_[static_cast<std::size_t>(i)]));
        continue;
      }
      const RequestRow& r = it->second;
      ImGui::TableNextColumn();
      ImGui::Text("%lld", static_cast<long long>(r.id));
      ImGui::TableNextColumn();
      if (r.phase == RequestPhase::Rejected)
        ImGui::TextColored(ImVec4(1.0f, 0.4f, 0.4f, 1.0f), "%s", state_name(r));
      else
        ImGui::TextUnformatted(state_name(r));
      ImGui::TableNextColumn();
      if (r.rank >= 0) ImGui::Text("%d", r.rank);
      ImGui::TableNextColumn();
      ImGui::Text("%d", r.tokens_in);
      ImGui::TableNextColumn();
      ImGui::Text("%d", r.tokens_out);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.arrival_ns == RequestRow::kNever ? "-" : format_time(r.arrival_ns, 1'000'000).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(maybe(r.ttft_ns()).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(maybe(r.mean_itl_ns()).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(maybe(key(r, 8)).c_str());
    }
  }
  ImGui::EndTable();
}

}  // namespace sy::console
