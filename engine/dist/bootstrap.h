// The rendezvous of the ranks of one deployment over ZeroMQ (no MPI library): every rank binds
// its data socket, rank 0 listens at MASTER_ADDR:MASTER_PORT, the others say hello there with
// what they run, and rank 0 answers with every rank's data endpoint, or refuses them all with
// the reason when what they run differs. Bounded by the bootstrap timeout on every rank. It also
// carries what device links between the ranks need (DeviceLinks: NCCL's unique ids), as opaque
// bytes, so that this file knows no GPU library. With SWITCHYARD_KEYS (env.keys) every socket
// it makes, and every one ProcessLinks makes from its context, speaks CURVE (rank_keys.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "base/status.h"
#include "engine/dist/bootstrap_messages.h"
#include "engine/dist/rank_environment.h"
#include "telemetry/zap_handler.h"

namespace sy::dist {

// What the ranks exchange for their device links (all empty without any).
struct LinkExchange {
  std::string memory;  // this rank's device memory identity, sent in its hello (DeviceLinks)
  // Rank 0, once every rank has checked in: the bytes every rank connects with, from every
  // rank's identity; an error refuses the deployment with its reason. Unset: none.
  std::function<StatusOr<std::string>(const std::vector<std::string>& memories)> setup;
};

struct Rendezvous {
  std::unique_ptr<zmq::context_t> context;
  // With keys: the context's ZAP handler, which admits only the keys' authorised clients on
  // every CURVE server socket of the context. Declared after the context: it goes first.
  std::unique_ptr<telemetry::ZapHandler> zap;
  std::shared_ptr<const RankKeys> keys;  // null without SWITCHYARD_KEYS
  zmq::socket_t data;                  // this rank's PULL socket, bound
  std::vector<std::string> endpoints;  // every rank's data socket, by rank
  std::vector<std::string> memories;   // every rank's device memory identity, by rank
  std::string link_setup;              // rank 0's LinkExchange::setup bytes (empty without)
};

// CURVE on a socket of the rendezvous's context before it binds (server) or connects (client);
// nothing without keys. Throw zmq::error_t as libzmq's setters do.
void listen_securely(zmq::socket_t& socket, const RankKeys* keys);
void connect_securely(zmq::socket_t& socket, const RankKeys* keys);

// Blocks until every rank has checked in (rank 0) or rank 0 has answered (the others), at
// most env.bootstrap_timeout_s. Errors name the address that could not be reached or bound,
// the ranks missing, or what differs between ranks.
StatusOr<Rendezvous> bootstrap(const RankEnvironment& env, const RunIdentity& identity,
                               const LinkExchange& links = {});

}  // namespace sy::dist
