// Which ZeroMQ endpoints stay on this machine, and the rule that listening anywhere else needs
// CURVE keys unless the operator explicitly opts out with --insecure.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace sy::telemetry {

// tcp://127.x.y.z:P, tcp://localhost:P, tcp://[::1]:P, ipc://…, inproc://… are loopback;
// everything else (tcp://*:P, tcp://0.0.0.0:P, an interface name, a routable address) is not.
bool is_loopback_endpoint(std::string_view endpoint);

// Ok for a loopback endpoint, with CURVE keys, or with `insecure`; otherwise an error that
// names the endpoint and both ways out (what = "telemetry" or "control", for the message).
Status check_listen_endpoint(std::string_view what, std::string_view endpoint, bool have_curve_keys, bool insecure);

// Whether `endpoint` names a transport the sockets speak: tcp://, ipc:// or inproc://.
bool has_zmq_transport(std::string_view endpoint);

// The form ZeroMQ binds: a tcp port written as 0 becomes `*`, "any free port".
std::string zmq_bind_endpoint(std::string endpoint);

}  // namespace sy::telemetry
