// Applies CURVE settings to cppzmq sockets: the server side (key pair, ZAP domain) and the
// client side (server key, own pair). For the telemetry library and the engine's sockets between
// ranks (engine/dist), which link cppzmq themselves.
#pragma once

#include <zmq.hpp>

#include "telemetry/curve_keys.h"
#include "telemetry/curve_server.h"
#include "base/status.h"

namespace sy::telemetry {

// Throw zmq::error_t if libzmq refuses an option (a malformed key); the callers turn it into a Status.
void set_curve_server(zmq::socket_t& socket, const CurveServerConfig& config);
void set_curve_client(zmq::socket_t& socket, const CurveClientKeys& keys);

// What every client checks before connecting: a transport ZeroMQ speaks and, when given,
// well-formed keys. `what` names the endpoint's role in the message ("telemetry", "control").
Status check_client_endpoint(std::string_view what, const std::string& endpoint, const CurveClientKeys* keys);

}  // namespace sy::telemetry
