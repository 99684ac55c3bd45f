// Writes a recorded trace (any schema version) as a schema-1 database, a row per span and
// queue sample, for ad-hoc SQL (`switchyard trace export-spans`).
#pragma once

#include <filesystem>

#include "base/status.h"
#include "telemetry/trace_reader.h"

namespace sy::telemetry {

// Creates `path` (refuses an existing file). Reads the source a time chunk at a time.
Status export_row_trace(const TraceReader& trace, const std::filesystem::path& path);

}  // namespace sy::telemetry
