// A control socket client: sends one JSON command and waits for the engine's JSON reply
// (docs/control-protocol.md). A timeout never leaves the client stuck: the next call works.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "telemetry/curve_keys.h"
#include "base/status.h"

namespace sy::telemetry {

class ControlClient {
 public:
  static StatusOr<std::unique_ptr<ControlClient>> connect(const std::string& endpoint,
                                                          const CurveClientKeys* keys = nullptr);
  virtual ~ControlClient() = default;

  // Sends `request` (raw bytes: a JSON object normally, anything in tests) and returns the
  // reply text. An error only when no reply came within `timeout` or the socket failed; an
  // engine-side error is a reply `{"ok":false,"error":"…"}`, returned as text.
  virtual StatusOr<std::string> call(const std::string& request, std::chrono::milliseconds timeout) = 0;

  // For an owner about to drop the client while another thread may be inside call(): that call
  // returns at once with an error instead of running out its timeout, and every later call fails
  // the same way. Safe to call from any thread, more than once.
  virtual void cancel() = 0;
};

}  // namespace sy::telemetry
