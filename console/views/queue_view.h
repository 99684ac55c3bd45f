// μ-queue depths: a heatmap of depth per queue (or per device and block, or per device) over the
// window ending at the scrubber, and a line plot of the queues selected by clicking their rows.
#pragma once

#include <vector>

#include "console/model/console_model.h"
#include "console/views/view_state.h"

namespace sy::console {

class QueueView {
 public:
  void draw(const ConsoleModel& model, ViewState& state);

 private:
  std::vector<double> bins_;
  std::vector<std::vector<double>> grid_;
};

// "e0 attn b3 r0", "e1 exp b3 e2", "e1 b3 (8 queues)", "e1 (64 queues)".
std::string queue_row_label(const QueueRow& row, QueueGrouping grouping, const RunMeta* meta);

}  // namespace sy::console
