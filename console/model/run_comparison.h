// The console's side of comparing runs (after Tracy's trace comparison): the profile of what
// the model holds (a live run's whole-run windows, or an open recording's) in the form
// `switchyard trace compare` prints, to set beside another recording's.
#pragma once

#include <string>

#include "console/model/console_model.h"
#include "telemetry/trace_compare.h"

namespace sy::console {

// Per-device throughput, busy and stall shares from the model's whole-run windows over its
// whole run; mean queued tokens from the μ-queue samples it holds (time-averaged over their
// range: a live run's retention, or a recording's whole run or zoomed range).
telemetry::RunProfile profile_model(const ConsoleModel& model, std::string label);

}  // namespace sy::console
