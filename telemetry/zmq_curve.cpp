#include "telemetry/zmq_curve.h"

#include "telemetry/endpoint.h"

namespace sy::telemetry {

void set_curve_server(zmq::socket_t& socket, const CurveServerConfig& config) {
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, config.server.secret_key);
  socket.set(zmq::sockopt::zap_domain, "switchyard");
}

void set_curve_client(zmq::socket_t& socket, const CurveClientKeys& keys) {
  socket.set(zmq::sockopt::curve_serverkey, keys.server_public_key);
  socket.set(zmq::sockopt::curve_publickey, keys.client.public_key);
  socket.set(zmq::sockopt::curve_secretkey, keys.client.secret_key);
}

Status check_client_endpoint(std::string_view what, const std::string& endpoint, const CurveClientKeys* keys) {
  if (!has_zmq_transport(endpoint)) {
    return Status::Error(std::string(what) + " endpoint '" + endpoint +
                         "' is not tcp://HOST:PORT, ipc://PATH or inproc://NAME");
  }
  if (keys != nullptr && (!is_valid_curve_key(keys->server_public_key) || !is_valid_curve_key(keys->client.public_key) ||
                          !is_valid_curve_key(keys->client.secret_key))) {
    return Status::Error("CURVE keys for " + endpoint + " are malformed (each must be 40 characters of Z85)");
  }
  return Status::Ok();
}

}  // namespace sy::telemetry
