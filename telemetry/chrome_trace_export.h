// Converts a recorded trace into Chrome trace-event JSON (what Perfetto and chrome://tracing
// open): a process per device, a thread per lane, complete events for spans, counters for
// queue depths and throughput, instant events for control commands.
#pragma once

#include <filesystem>
#include <ostream>

#include "base/status.h"
#include "telemetry/trace_reader.h"

namespace sy::telemetry {

// Writes the whole trace to `out`; timestamps in microseconds with nanosecond decimals.
Status write_chrome_trace(const TraceReader& trace, std::ostream& out);
// Writes to a file atomically (a temporary beside it, renamed when complete).
Status export_chrome_trace(const TraceReader& trace, const std::filesystem::path& path);

}  // namespace sy::telemetry
