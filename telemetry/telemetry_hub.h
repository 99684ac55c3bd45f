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
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "telemetry/curve_server.h"
#include "telemetry/flight_recorder.h"
#include "telemetry/producer.h"
#include "base/status.h"
#include "telemetry/trace_recorder.h"
#include "telemetry/wire.h"

namespace sy::telemetry {

// A run id as a hub draws one when HubOptions::run_id is 0: random, nonzero.
std::uint64_t random_run_id();

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

// When the flight recorder writes itself out without being asked: on the first summary window
// whose inter-token p99 exceeds itl_p99_ms, or in which a device stalled more than
// stall_fraction of the window (all reasons together). Fires once; unset bounds never fire.
struct RingTrigger {
  std::optional<double> itl_p99_ms;
  std::optional<double> stall_fraction;
  bool rank_lost = false;  // a process of the deployment died (control event `rank_lost`)
  bool armed() const { return itl_p99_ms.has_value() || stall_fraction.has_value() || rank_lost; }
};

// What a trigger did: the summary that fired it, and the dump's outcome.
struct RingDumpEvent {
  std::string reason;  // e.g. "itl_p99_ms 12.5 > 10"
  std::filesystem::path path;
  Status status;
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
  Status stop_recording(const std::map<std::string, std::string>& final_metadata = {});
  // The running recording's file, if any.
  std::optional<std::filesystem::path> recording_path() const;
  std::optional<RecorderStats> recording_stats() const;

  // Starts the flight recorder (at most one, beside or without a recording). `dump_to` is where
  // a trigger writes (its path, metadata and device names); `on_trigger` is told, from the
  // dumping thread, what a trigger did. Error if one runs already or the options are wrong.
  Status start_ring(FlightRecorderOptions options, RingTrigger trigger, RecorderOptions dump_to,
                    std::function<void(const RingDumpEvent&)> on_trigger = {});
  // Writes what the ring holds now to `options.path` (a new trace); the ring goes on.
  Status dump_ring(RecorderOptions options);
  // Discards the ring. Error when none runs.
  Status stop_ring();
  std::optional<FlightRecorderStats> ring_stats() const;
  // Where a trigger would write; nullopt without a ring.
  std::optional<std::filesystem::path> ring_path() const;

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
  std::shared_ptr<FlightRecorder> ring_;
  RingTrigger ring_trigger_;
  RecorderOptions ring_dump_to_;
  std::function<void(const RingDumpEvent&)> ring_on_trigger_;
  // A triggered dump runs here, off the publisher thread; joined before the next and at exit.
  std::mutex dumper_mutex_;
  std::thread dumper_;
  void check_trigger(Topic topic, const std::string& json);

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
