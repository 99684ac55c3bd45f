// Export of a trace as an SQLite file: a consistent copy of a recording (also one still being
// written, in WAL mode) made with SQLite's online backup API.
#pragma once

#include <filesystem>

#include "base/status.h"

namespace sy::console {

// Copies the database at `source` to `destination` (replaced if it exists; written beside it
// and renamed, so a failed copy leaves nothing half-written). Errors name the file and the problem.
Status copy_trace_database(const std::filesystem::path& source, const std::filesystem::path& destination);

}  // namespace sy::console
