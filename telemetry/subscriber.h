// A telemetry stream client: a ZeroMQ SUB socket that receives and decodes batches, notices
// lost messages by sequence gaps and engine restarts by a new run id, and reconnects by itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "telemetry/curve_keys.h"
#include "base/status.h"
#include "telemetry/wire.h"

namespace sy::telemetry {

class Subscriber {
 public:
  // Connects (asynchronously, as ZeroMQ does) to `endpoint` (tcp://host:port or ipc://path)
  // and subscribes to every topic. With `keys`, the connection uses CURVE. Errors name a
  // malformed endpoint or key.
  static StatusOr<std::unique_ptr<Subscriber>> connect(const std::string& endpoint,
                                                       const CurveClientKeys* keys = nullptr);
  virtual ~Subscriber() = default;

  // Waits up to `timeout` for the first message, then takes every message already queued
  // without waiting more. Messages that do not decode are counted and skipped.
  virtual std::vector<Batch> poll(std::chrono::milliseconds timeout) = 0;

  // Messages missed (sum of sequence gaps per topic within one run).
  virtual std::uint64_t lost_messages() const = 0;
  virtual std::uint64_t decode_errors() const = 0;
  // The run id of the last batch received (0 before any); it changes when the engine restarts.
  virtual std::uint64_t run_id() const = 0;
  // Wall time of the last message received; the epoch before any.
  virtual std::chrono::steady_clock::time_point last_message() const = 0;
};

}  // namespace sy::telemetry
