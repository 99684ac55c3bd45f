// Expert-load skew for the window at the scrubber: a block x expert heatmap (tokens against the
// block's mean), imbalance (max/mean) per block and per device, and the hottest experts.
#pragma once

#include <cstdint>

#include "console/model/console_model.h"
#include "console/model/skew_analysis.h"
#include "console/views/view_state.h"

namespace sy::console {

class SkewView {
 public:
  void draw(const ConsoleModel& model, ViewState& state);

 private:
  // Cached against the window and the model version.
  SkewAnalysis analysis_;
  const LoadWindow* window_ = nullptr;
  std::int64_t window_start_ = 0, window_end_ = 0;  // the folded window is one object: tell them apart by time
  std::uint64_t version_ = ~0ull;
};

}  // namespace sy::console
