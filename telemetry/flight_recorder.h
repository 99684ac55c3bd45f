// The flight recorder: keeps the last N minutes (or N megabytes) of the telemetry stream in
// memory, spans and queue samples as compressed blocks, and writes them out as a trace on
// demand (`record_dump`) or when a trigger fires — the minute before an incident. Blocks are
// compressed on a thread of its own, not on the publisher's that feeds it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "telemetry/events.h"
#include "telemetry/trace_block_codec.h"
#include "telemetry/trace_recorder.h"
#include "telemetry/wire.h"

namespace sy::telemetry {

struct FlightRecorderOptions {
  // What is kept: records within keep_ns of the newest one (run time base), and at most
  // max_bytes of compressed blocks (the oldest go first). 0 leaves that bound off; one must be set.
  std::int64_t keep_ns = 0;
  std::uint64_t max_bytes = 0;
  BlockCodec codec = BlockCodec::Zstd;
  int codec_level = 3;
  std::uint32_t block_records = 32768;
};

struct FlightRecorderStats {
  std::uint64_t bytes = 0;    // compressed blocks and the small records held
  std::uint64_t records = 0;  // records held
  std::uint64_t evicted = 0;  // records let go so far
  std::int64_t oldest_ns = 0, newest_ns = 0;
};

// What a dump writes: a copy taken under the lock, so that writing never holds up the stream.
struct FlightSnapshot {
  struct Block {
    bool spans = true;  // else queue samples
    EncodedBlock block;
  };
  std::vector<Block> blocks;
  std::vector<Span> spans;  // not yet in a block
  std::vector<QueueSample> queues;
  std::vector<ExpertLoad> loads;
  std::vector<RequestEvent> requests;
  std::vector<std::pair<Topic, std::string>> json;  // control and summary objects
  std::int64_t horizon_ns = 0;                        // records ending before it are out of the window
};

class FlightRecorder {
 public:
  // Errors: neither bound set, or a negative one.
  static StatusOr<std::unique_ptr<FlightRecorder>> create(FlightRecorderOptions options);
  // Compresses what is left, then stops the compressing thread.
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Any thread.
  void add(std::span<const Span> records);
  void add(std::span<const QueueSample> records);
  void add(std::span<const ExpertLoad> records);
  void add(std::span<const RequestEvent> records);
  void add_json(Topic topic, const std::string& object_json);  // control and summary only

  // Both see every record added before them, its block compressed (they wait for the
  // compressing thread to catch up).
  FlightSnapshot snapshot() const;
  FlightRecorderStats stats() const;
  const FlightRecorderOptions& options() const { return options_; }

 private:
  // A full block of one device's records, waiting to be compressed.
  struct RawBlock {
    std::int32_t device = 0;
    std::vector<Span> spans;          // either these
    std::vector<QueueSample> queues;  // or these
  };
  // Full blocks waiting at most; beyond it the publisher waits (the stream is not dropped).
  static constexpr std::size_t kMaxWaiting = 64;

  explicit FlightRecorder(FlightRecorderOptions options);
  void seen(std::int64_t t);
  void evict();
  void queue(RawBlock raw, std::unique_lock<std::mutex>& lock);
  void compress_loop();
  void wait_compressed(std::unique_lock<std::mutex>& lock) const;

  FlightRecorderOptions options_;
  mutable std::mutex mu_;
  mutable std::condition_variable work_;  // to the compressing thread: a block waits, or stop
  mutable std::condition_variable done_;  // from it: a block was compressed
  std::deque<RawBlock> waiting_;
  bool compressing_ = false;  // a block is out of waiting_ and not yet in blocks_
  bool stopping_ = false;
  std::deque<FlightSnapshot::Block> blocks_;
  std::map<std::int32_t, std::vector<Span>> pending_spans_;
  std::map<std::int32_t, std::vector<QueueSample>> pending_queues_;
  std::deque<ExpertLoad> loads_;
  std::deque<RequestEvent> requests_;
  std::deque<std::pair<std::int64_t, std::pair<Topic, std::string>>> json_;  // (time, object)
  std::uint64_t block_bytes_ = 0;
  std::uint64_t block_records_ = 0;
  std::uint64_t evicted_ = 0;
  std::int64_t newest_ns_ = 0;
  bool any_ = false;
  std::thread compressor_;  // last: started once everything above exists
};

// Writes a snapshot's records inside its window as a new trace (schema 2) at `options.path`
// (created exclusively unless options.overwrite).
Status write_flight_snapshot(const FlightSnapshot& snapshot, RecorderOptions options);

}  // namespace sy::telemetry
