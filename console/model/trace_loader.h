// Post-mortem: fills a ConsoleModel from a recorded trace, with no retention limits, so that
// the live views show the whole recording.
#pragma once

#include "console/model/console_model.h"
#include "base/status.h"
#include "telemetry/trace_reader.h"

namespace sy::console {

// Clears `model` and loads everything `reader` holds. Errors name the table that failed to read.
Status load_trace(const telemetry::TraceReader& reader, ConsoleModel& model);

// The recording's expert load, request events, summaries and control events into `model`: what a
// full load and an overview both read whole.
Status load_trace_events(const telemetry::TraceReader& reader, ConsoleModel& model);

// The run metadata of a trace: its META table as one meta object (values that are JSON text are
// taken as JSON), device names from the reader when the table has no device list.
StatusOr<RunMeta> trace_run_meta(const telemetry::TraceReader& reader);

}  // namespace sy::console
