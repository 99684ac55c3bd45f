// A small, deterministic run of a simulated 8-device cluster (4 attention + 4 expert devices),
// recorded with the telemetry library's TraceRecorder: what the console's trace tests open.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "base/status.h"

namespace sy::console::testing {

struct SyntheticTraceCounts {
  std::size_t spans = 0;      // records in SPANS
  std::size_t transfers = 0;  // of which transfers: the console shows each on two lanes
  std::size_t queue_samples = 0;
  std::size_t loads = 0;
  std::size_t request_events = 0;
  std::size_t summaries = 0;
  std::size_t control_events = 0;
  std::int64_t end_ns = 0;
};

// `seconds` of run time; about 12k spans per second.
StatusOr<SyntheticTraceCounts> write_synthetic_trace(const std::filesystem::path& path, int seconds = 3);

}  // namespace sy::console::testing
