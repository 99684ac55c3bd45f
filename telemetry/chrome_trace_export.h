// Converts a recorded trace into Chrome trace-event JSON (what Perfetto and chrome://tracing
// open): a process per device, a thread per lane, complete events for spans, counters for
// queue depths and throughput, instant events for control commands.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <set>

#include "base/status.h"
#include "telemetry/trace_reader.h"

namespace sy::telemetry {

// What to export: a time range (run time base, ns; spans overlapping it are kept whole) and a
// set of devices (a transfer is kept when its source or destination is one of them).
struct ChromeExportOptions {
  std::int64_t from_ns = TraceReader::kMin;
  std::int64_t to_ns = TraceReader::kMax;
  std::optional<std::set<std::int32_t>> devices;  // nullopt: all
};

// Writes the trace (or the selected part) to `out`; timestamps in microseconds with nanosecond
// decimals. Reads the trace a time chunk at a time, so memory stays bounded by one chunk.
Status write_chrome_trace(const TraceReader& trace, std::ostream& out, const ChromeExportOptions& options = {});
// Writes to a file atomically (a temporary beside it, renamed when complete).
Status export_chrome_trace(const TraceReader& trace, const std::filesystem::path& path,
                           const ChromeExportOptions& options = {});

}  // namespace sy::telemetry
