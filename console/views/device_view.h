// Where each device's time goes over a range ending at the scrubber: busy and stall shares,
// executions per second and their rows (batch fragmentation), shipments, queueing delay, with
// attention and expert means above the devices, and the rows per execution over time.
#pragma once

#include <cstdint>

#include "console/model/console_model.h"
#include "console/views/view_state.h"

namespace sy::console {

class DeviceView {
 public:
  void draw(const ConsoleModel& model, ViewState& state);

 private:
  int range_ = 1;  // index into the range choices: 1 s, 5 s, 30 s, 2 min, the whole run
};

}  // namespace sy::console
