#include "console/model/request_table.h"

namespace sy::console {

std::int64_t RequestRow::ttft_ns() const {
  if (first_token_ns == kNever || arrival_ns == kNever) return kNever;
  return first_token_ns - arrival_ns;
}

std::int64_t RequestRow::mean_itl_ns() const {
  if (finished_ns == kNever || first_token_ns == kNever || tokens_out < 2) return kNever;
  return (finished_ns - first_token_ns) / (tokens_out - 1);
}

void RequestTable::add(const telemetry::RequestEvent& e) {
  RequestRow& row = rows_[e.request_id];
  row.id = e.request_id;
  switch (e.phase) {
    case telemetry::RequestPhase::Arrival: row.arrival_ns = e.t_ns; break;
    case telemetry::RequestPhase::Admitted: row.admitted_ns = e.t_ns; break;
    case telemetry::RequestPhase::FirstToken: row.first_token_ns = e.t_ns; break;
    case telemetry::RequestPhase::Finished:
    case telemetry::RequestPhase::Rejected: row.finished_ns = e.t_ns; break;
  }
  // Events of one request can arrive in any order across batches; the row keeps its furthest step.
  if (static_cast<int>(e.phase) >= static_cast<int>(row.phase)) row.phase = e.phase;
  if (e.tokens_in > 0) row.tokens_in = e.tokens_in;
  if (e.tokens_out > row.tokens_out) row.tokens_out = e.tokens_out;
  if (e.rank >= 0) row.rank = e.rank;
  while (rows_.size() > max_rows_) rows_.erase(rows_.begin());
  ++version_;
}

void RequestTable::clear() {
  rows_.clear();
  ++version_;
}

std::size_t RequestTable::count(telemetry::RequestPhase phase) const {
  std::size_t n = 0;
  for (const auto& [id, row] : rows_)
    if (row.phase == phase) ++n;
  return n;
}

}  // namespace sy::console
