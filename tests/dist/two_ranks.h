// Two ranks' rendezvous in one process, as the bootstrap leaves them: a bound data socket each
// and both endpoints, with CURVE and a ZAP handler each when given keys (SWITCHYARD_KEYS); for
// tests of what passes between ranks without launching processes.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/dist/process_links.h"

namespace sy::dist {

inline std::vector<Rendezvous> two_ranks(std::shared_ptr<const RankKeys> keys = nullptr) {
  std::vector<Rendezvous> out(2);
  std::vector<std::string> endpoints;
  for (Rendezvous& r : out) {
    r.context = std::make_unique<zmq::context_t>(1);
    if (keys) {
      auto zap = telemetry::ZapHandler::start(*r.context, keys->server.authorized_clients);
      if (!zap.ok()) throw std::runtime_error(zap.status().message());
      r.zap = std::move(*zap);
      r.keys = keys;
    }
    r.data = zmq::socket_t(*r.context, zmq::socket_type::pull);
    listen_securely(r.data, keys.get());
    r.data.bind("tcp://127.0.0.1:*");
    endpoints.push_back(r.data.get(zmq::sockopt::last_endpoint));
  }
  for (Rendezvous& r : out) r.endpoints = endpoints;
  return out;
}

}  // namespace sy::dist
