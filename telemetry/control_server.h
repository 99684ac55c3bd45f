// The engine's control endpoint: a ZeroMQ ROUTER on its own thread that validates every request
// (size, framing, UTF-8 JSON object with a string "cmd") before the engine's handler sees it,
// routes each reply to its client, answers for a handler that is too slow, and refuses floods.
// docs/control-protocol.md is the client-facing description.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "telemetry/curve_server.h"
#include "base/status.h"

namespace sy::telemetry {

struct ControlServerOptions {
  // tcp://127.0.0.1:5556 by default in the engine; port `*` or 0 picks a free one (see endpoint()).
  std::string endpoint;
  // CURVE: clients without an authorised key get no connection, hence no reply.
  std::optional<CurveServerConfig> curve;
  // Larger requests are answered with an error; beyond kMaxMessageBytes the connection is dropped.
  std::size_t max_request_bytes = 64 * 1024;
  // Requests handed to the handler and not yet answered, in all and per client connection;
  // beyond either the request is answered "busy" at once.
  std::size_t max_pending = 64;
  std::size_t max_pending_per_client = 8;
  // A request the handler has not answered by then gets {"ok":false,"error":"timed out …"}.
  std::chrono::milliseconds handler_timeout{10000};
  // JSON nesting deeper than this is refused before parsing.
  int max_depth = 64;
  // When set, a "cmd" outside this list is answered "unknown command" without reaching the handler.
  std::vector<std::string> known_commands;
};

struct ControlServerCounters {
  std::uint64_t requests = 0;  // messages received
  std::uint64_t handled = 0;   // passed to the handler
  std::uint64_t invalid = 0;   // answered with a validation error
  std::uint64_t busy = 0;      // refused: too many pending
  std::uint64_t timeouts = 0;  // answered for the handler after handler_timeout
  std::uint64_t late_replies = 0;  // replies the handler gave after its request timed out (dropped)
};

class ControlServer {
 public:
  // Hard ceiling on a message ZeroMQ accepts at all: a bigger one closes the connection
  // without a reply, so that nobody can make the engine buffer gigabytes.
  static constexpr std::int64_t kMaxMessageBytes = 4 * 1024 * 1024;

  // Answers one request exactly once. Copyable, callable from any thread at any later time;
  // calls after the first, after the timeout reply, or after the server is gone do nothing.
  // The object must have "ok" (boolean); anything else is replaced by an internal-error reply.
  class Reply {
   public:
    struct Slot;  // defined by the server; a default-constructed Reply answers nothing
    Reply() = default;
    explicit Reply(std::shared_ptr<Slot> slot) : slot_(std::move(slot)) {}

    void operator()(const nlohmann::json& reply) const;
    // Shorthand for {"ok":false,"error":message}.
    void error(const std::string& message) const;

   private:
    std::shared_ptr<Slot> slot_;
  };

  // Called on the server's dispatch thread, one request at a time, with a validated command
  // (an object whose "cmd" is a string). It should hand the work to the engine's loop and
  // return; the reply may come later from any thread. An exception becomes an error reply.
  using Handler = std::function<void(nlohmann::json command, Reply reply)>;

  static StatusOr<std::unique_ptr<ControlServer>> start(ControlServerOptions options, Handler handler);
  // Stops both threads; requests still pending get no reply (their clients time out). Waits
  // for a handler call in progress to return, so a handler must never block indefinitely.
  ~ControlServer();
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // The bound endpoint with the port the OS chose.
  const std::string& endpoint() const;
  ControlServerCounters counters() const;

  // Validates one request body exactly as the server does: the command object, or the error
  // message the client would get. Public so that other transports (tests, a future HTTP
  // front) apply the same rules.
  static StatusOr<nlohmann::json> parse_request(std::string_view body, const ControlServerOptions& limits);

 private:
  struct Core;
  explicit ControlServer(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace sy::telemetry
