// Serving charts from the window summaries: throughput, inter-token latency and time to first
// token percentiles, running/waiting requests, device busy fractions and KV-cache usage.
#pragma once

#include "console/model/console_model.h"
#include "console/views/view_state.h"

namespace sy::console {

class ChartsView {
 public:
  void draw(const ConsoleModel& model, ViewState& state);
};

}  // namespace sy::console
