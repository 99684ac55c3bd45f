// The engine's telemetry hub: owns one Producer per worker, a publisher thread that drains their
// rings every few milliseconds into batched, sequenced messages on a ZeroMQ PUB socket, the
// low-rate JSON topics, and the SQLite recorder while a recording runs.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "telemetry/curve_server.h"
#include "telemetry/producer.h"
#include "base/status.h"
#include "telemetry/trace_recorder.h"
#include "telemetry/wire.h"

namespace sy::telemetry {

struct HubOptions {
  // Where the PUB socket binds (tcp://127.0.0.1:5555; port `*` or 0 picks a free one, see
  // endpoint()). Empty: no socket; records still reach the recorder.
  std::string endpoint;
  // CURVE for the PUB socket: only clients with an authorised key receive anything.
  std::optional<CurveServerConfig> curve;
  std::chrono::milliseconds drain_interval{10};
  std::uint32_t max_records_per_message = 4096;
  // Messages queued per subscriber before PUB drops for that subscriber (sequence gaps tell it).
  int send_high_water_mark = 2000;
  RingCapacities rings;
  // JSON objects waiting for the publisher, per topic; beyond it they are dropped and counted.
  std::size_t max_pending_json = 1024;
  // 0: a random nonzero id.
  std::uint64_t run_id = 0;
};

struct TopicCounters {
  std::uint64_t messages = 0;  // messages published (with or without a socket)
  std::uint64_t records = 0;   // records in them
  std::uint64_t dropped = 0;   // records lost before publishing: full rings or JSON queue
};

class TelemetryHub {
 public:
  // Binds the socket (with CURVE when configured) and starts the publisher. Errors name the
  // endpoint (malformed, in use) or the key problem.
  static StatusOr<std::unique_ptr<TelemetryHub>> start(HubOptions options);
  // Publishes what is left in the rings, stops the recorder, closes the socket, joins.
  ~TelemetryHub();
  TelemetryHub(const TelemetryHub&) = delete;
  TelemetryHub& operator=(const TelemetryHub&) = delete;

  // A new producer for one worker thread; it lives as long as the hub. Thread-safe.
  Producer& add_producer(std::string name);

  // Queues one JSON object (text) for a JSON topic (control, summary, meta), from any thread.
  // Errors: a binary topic, or text that is not one JSON object.
  Status publish_json(Topic topic, std::string_view object_json);

  // Drains every ring and the JSON queue now and returns once they are published (and handed
  // to the recorder). Any thread but the publisher's.
  void flush();

  std::uint64_t run_id() const { return run_id_; }
  // The bound endpoint with the port the OS chose; empty without a socket.
  const std::string& endpoint() const { return endpoint_; }
  TopicCounters counters(Topic topic) const;
  // Records dropped on every topic so far: the summary's `dropped_events`.
  std::uint64_t dropped_records() const;

  // Starts recording the stream into a new SQLite trace; `run_id` is added to the metadata. Error if a recording runs already or the file cannot be created.
  Status start_recording(RecorderOptions options);
  // Publishes what is pending into the trace, then stops it (indexes, close). The error is the
  // recording's first write error, or "no recording" when none runs.
  Status stop_recording();
  // The running recording's file, if any.
  std::optional<std::filesystem::path> recording_path() const;
  std::optional<RecorderStats> recording_stats() const;

 private:
  struct Publisher;
  TelemetryHub() = default;
  void run();
  void cycle();

  std::uint64_t run_id_ = 0;
  std::string endpoint_;
  HubOptions options_;
  std::unique_ptr<Publisher> publisher_;

  mutable std::mutex producers_mutex_;
  std::deque<std::unique_ptr<Producer>> producers_;

  mutable std::mutex json_mutex_;
  std::vector<std::string> pending_json_[std::size(kAllTopics)];
  std::atomic<std::uint64_t> json_dropped_[std::size(kAllTopics)] = {};

  // Held by the publisher while it hands records over, so that stop_recording never races it.
  mutable std::mutex recorder_mutex_;
  std::unique_ptr<TraceRecorder> recorder_;

  std::atomic<std::uint64_t> messages_[std::size(kAllTopics)] = {};
  std::atomic<std::uint64_t> records_[std::size(kAllTopics)] = {};

  std::mutex cycle_mutex_;
  std::condition_variable wake_;
  std::condition_variable cycle_done_;
  bool flush_requested_ = false;
  std::uint64_t cycles_started_ = 0;
  std::uint64_t cycles_completed_ = 0;
  bool stopping_ = false;
  bool publisher_exited_ = false;
  std::thread thread_;
};

}  // namespace sy::telemetry
