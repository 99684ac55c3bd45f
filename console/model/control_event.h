// A control command the engine handled (the stream's `control` topic, a trace's control events):
// what was asked, what changed, and whether it worked. The timeline marks them.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace sy::console {

struct ControlEvent {
  std::int64_t t_ns = 0;
  std::string cmd;
  std::string request_json;
  std::string old_json;
  std::string new_json;
  bool ok = false;
  std::string error;
  std::string reason;  // rank_lost: why the process counts as dead
  // A placement change that copies weights is reported twice: "copying" when accepted,
  // "applied" at its switch; empty for every other event.
  std::string phase;

  // A one-line label: "set_policy: async/defrag -> pingpong" or "move_expert failed: ...".
  std::string label() const;
};

StatusOr<ControlEvent> parse_control_event(const std::string& json_object);

}  // namespace sy::console
