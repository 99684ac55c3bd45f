// The request table: one row per request with its state, DP rank, lengths and latencies;
// sortable by any column and filterable by state, drawn with a list clipper so that tens of
// thousands of rows stay cheap.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "console/model/console_model.h"
#include "console/views/view_state.h"

namespace sy::console {

class RequestTableView {
 public:
  void draw(const ConsoleModel& model, ViewState& state);

 private:
  std::vector<std::int64_t> order_;  // request ids, sorted (rows may go between re-sorts)
  std::uint64_t version_ = ~0ull;
  int sort_column_ = 0;
  bool sort_ascending_ = false;
  int filter_ = 0;  // 0 all, 1 waiting, 2 running, 3 finished, 4 rejected
  bool dirty_ = true;
  // A live table changes every frame; re-sorting it is throttled.
  std::chrono::steady_clock::time_point sorted_at_{};
};

}  // namespace sy::console
