// The ZeroMQ authentication (ZAP) handler of one context: admits a CURVE client only when its
// public key is authorised. For the telemetry library and the engine's sockets between ranks
// (engine/dist), which link cppzmq themselves (it speaks cppzmq types).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "base/status.h"

namespace sy::telemetry {

class ZapHandler {
 public:
  // Binds inproc://zeromq.zap.01 in `context` and answers on its own thread. Start it before
  // any CURVE socket of the context binds: a handshake with no handler present is not checked.
  static StatusOr<std::unique_ptr<ZapHandler>> start(zmq::context_t& context,
                                                     const std::vector<std::string>& authorized_z85);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  std::uint64_t accepted() const { return accepted_.load(); }
  std::uint64_t refused() const { return refused_.load(); }

 private:
  ZapHandler() = default;
  void run(zmq::socket_t& socket);

  std::vector<std::array<std::uint8_t, 32>> authorized_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> accepted_{0};
  std::atomic<std::uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace sy::telemetry
