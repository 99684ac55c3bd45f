// Two ranks' rendezvous in one process, as the bootstrap leaves them: a bound data socket each
// and both endpoints; for tests of what passes between ranks without launching processes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/dist/process_links.h"

namespace sy::dist {

inline std::vector<Rendezvous> two_ranks() {
  std::vector<Rendezvous> out(2);
  std::vector<std::string> endpoints;
  for (Rendezvous& r : out) {
    r.context = std::make_unique<zmq::context_t>(1);
    r.data = zmq::socket_t(*r.context, zmq::socket_type::pull);
    r.data.bind("tcp://127.0.0.1:*");
    endpoints.push_back(r.data.get(zmq::sockopt::last_endpoint));
  }
  for (Rendezvous& r : out) r.endpoints = endpoints;
  return out;
}

}  // namespace sy::dist
