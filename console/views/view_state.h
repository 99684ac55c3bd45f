// State the views share: the timeline's visible range, whether it follows the live edge, the
// scrubber time that the queue, skew and chart views show, and selections made in one view.
#pragma once

#include <cstdint>
#include <set>

#include "console/model/console_model.h"
#include "console/model/queue_store.h"

namespace sy::console {

struct ViewState {
  // Visible range of the timeline (run time base).
  std::int64_t view_t0_ns = 0;
  std::int64_t view_t1_ns = 1'000'000'000;
  // Live: the timeline keeps the newest data at its right edge until the user pans or zooms.
  bool follow_live = true;
  // The scrubber: the time the queue, skew and chart views show; -1 means "the newest".
  std::int64_t cursor_ns = -1;
  bool live = true;

  std::set<QueueKey> selected_queues;
  QueueGrouping queue_grouping = QueueGrouping::DeviceBlock;
  BinMode queue_bin_mode = BinMode::Mean;
  // The heatmap's window ending at the scrubber; kWholeRun shows the run from its start.
  static constexpr std::int64_t kWholeRun = -1;
  std::int64_t queue_window_ns = 10'000'000'000;
  std::int64_t chart_window_ns = 120'000'000'000;
  double min_fold_px = 3.0;

  // Resolved scrubber time for `model`.
  std::int64_t now(const ConsoleModel& model) const {
    return cursor_ns >= 0 ? cursor_ns : model.end_ns();
  }
};

}  // namespace sy::console
