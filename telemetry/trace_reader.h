// Reads a recorded SQLite trace (docs/trace-schema.md): run metadata and every event table, in
// the same record types the stream carries. Works on a finished recording, on one still being
// written (WAL readers see committed batches) and on one whose writer was killed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "telemetry/events.h"
#include "telemetry/span_windows.h"
#include "base/status.h"

namespace sy::telemetry {

// Whether a recording's metadata says its writer finished it (META.complete = 1): one still
// being written, or whose writer was killed, holds spans only up to its last committed blocks.
inline bool recording_complete(const std::map<std::string, std::string>& metadata) {
  const auto it = metadata.find("complete");
  return it != metadata.end() && it->second == "1";
}

class TraceReader {
 public:
  // Opens read-only. Errors name the file and the problem (missing, not SQLite, not a
  // Switchyard trace, a schema version newer than this reader knows).
  static StatusOr<std::unique_ptr<TraceReader>> open(const std::filesystem::path& path);
  virtual ~TraceReader() = default;

  virtual int schema_version() const = 0;
  // The META key/value table (model, devices, layout, policy, clock, ...).
  virtual std::map<std::string, std::string> metadata() const = 0;
  // First and last timestamp of any recorded event (0, 0 when empty).
  virtual std::int64_t start_ns() const = 0;
  virtual std::int64_t end_ns() const = 0;
  // Device names by device index, from the metadata.
  virtual std::vector<std::string> device_names() const = 0;

  static constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  static constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  // Events overlapping [t0, t1] (spans) or inside it (point events), ordered by time.
  virtual StatusOr<std::vector<Span>> spans(std::int64_t t0 = kMin, std::int64_t t1 = kMax) const = 0;
  virtual StatusOr<std::vector<QueueSample>> queue_samples(std::int64_t t0 = kMin, std::int64_t t1 = kMax) const = 0;
  virtual StatusOr<std::vector<ExpertLoad>> expert_load(std::int64_t t0 = kMin, std::int64_t t1 = kMax) const = 0;
  virtual StatusOr<std::vector<RequestEvent>> requests(std::int64_t t0 = kMin, std::int64_t t1 = kMax) const = 0;
  // The per-window span aggregates (SPAN_WINDOWS) overlapping [t0, t1], rows of one key summed,
  // ordered by (start, device, lane). Recordings made before the overview have none:
  // has_span_windows() is false and the result is empty (a caller computes them from spans()).
  virtual bool has_span_windows() const { return false; }
  virtual StatusOr<std::vector<SpanWindow>> span_windows(std::int64_t = kMin, std::int64_t = kMax) const {
    return std::vector<SpanWindow>{};
  }
  // Spans held by the trace, from block headers (no decoding); -1 when unknown (schema 1).
  virtual std::int64_t span_count() const { return -1; }
  // Control events and window summaries as the JSON objects the stream carried.
  virtual StatusOr<std::vector<std::string>> control_events() const = 0;
  virtual StatusOr<std::vector<std::string>> summaries() const = 0;
};

}  // namespace sy::telemetry
