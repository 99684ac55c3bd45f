// Records the telemetry stream into an SQLite trace (docs/trace-schema.md) on a background
// writer thread: WAL mode, batched transactions, a valid database at every moment (also after
// kill -9), indexes built when the recording stops.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "telemetry/events.h"
#include "base/status.h"
#include "telemetry/trace_block_codec.h"
#include "telemetry/wire.h"

namespace sy::telemetry {

// Schema 2 (the default) stores spans and queue samples in compressed blocks; schema 1 a row
// each (the plain tables `trace export-spans` writes for ad-hoc SQL).
enum class TraceFormat { Blocks, Rows };

struct RecorderOptions {
  std::filesystem::path path;
  TraceFormat format = TraceFormat::Blocks;
  BlockCodec codec = BlockCodec::Zstd;
  int codec_level = 5;  // zstd's level (docs/trace-schema.md: why 5)
  // Blocks format: also write per-second span aggregates (SPAN_WINDOWS), the overview a reader
  // opens without decoding blocks. Off: a file as before the overview (the benchmark's baseline).
  bool span_windows = true;
  // A device's block is written when it holds this many records, or when its oldest record
  // waited `block_max_age`: what a kill -9 can lose is at most that much of the stream.
  std::uint32_t block_records = 32768;
  std::chrono::milliseconds block_max_age{1000};
  // META rows: run metadata (model, layout, policy, clock, …); values are text, JSON for structures.
  std::map<std::string, std::string> metadata;
  // DEVICES rows: the name of device i.
  std::vector<std::string> device_names;
  // An existing file (and its -wal/-shm) is replaced only when set; otherwise open() refuses.
  bool overwrite = false;
  // Records waiting for the writer; beyond it, whole batches are dropped and counted so that
  // whoever feeds the recorder never waits for the disk.
  std::size_t max_queued_records = std::size_t{1} << 20;
  // The file stops growing past this many bytes (0: no cap): later records are dropped and
  // counted, and the file stays a valid, complete-up-to-then recording.
  std::uint64_t max_bytes = 0;
};

struct RecorderStats {
  std::uint64_t records_written = 0;  // records committed (events and JSON objects)
  std::uint64_t records_dropped = 0;  // rows refused: queue full, or after a write error
  std::uint64_t transactions = 0;
  std::uint64_t blocks_written = 0;
  bool size_capped = false;  // max_bytes was reached
};

class TraceRecorder {
 public:
  // Creates the file with its schema and starts the writer. Errors name the file and the
  // problem (exists, directory missing, not writable).
  static StatusOr<std::unique_ptr<TraceRecorder>> open(RecorderOptions options);
  // Stops (as stop()) if still running.
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // Any thread; copies the records and returns at once. False when they were dropped.
  bool add(std::span<const Span> records);
  bool add(std::span<const QueueSample> records);
  bool add(std::span<const ExpertLoad> records);
  bool add(std::span<const RequestEvent> records);
  // A JSON object of the control or summary topic (other topics are refused: false).
  bool add_json(Topic topic, std::string object_json);

  // Waits until everything added before the call is committed (partial blocks included);
  // returns the writer's error, if any.
  Status flush();
  // Drains, builds the indexes, marks the trace complete, leaves WAL mode (a single file again)
  // and closes. Idempotent. The error is the first write error of the recording, if any.
  // `final_metadata` rows are written (over any of the same key) with the completion mark:
  // what is only known by the end, such as the clock offsets measured over the run.
  Status stop(const std::map<std::string, std::string>& final_metadata = {});

  RecorderStats stats() const;
  const std::filesystem::path& path() const;

 private:
  struct State;
  explicit TraceRecorder(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace sy::telemetry
