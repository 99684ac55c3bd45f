// The server side of CURVE: the engine's key pair and the client keys it admits, applied to the
// telemetry PUB and control ROUTER sockets when they listen beyond loopback.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "telemetry/curve_keys.h"
#include "base/status.h"

namespace sy::telemetry {

struct CurveServerConfig {
  CurveKeyPair server;                          // must hold the secret key
  std::vector<std::string> authorized_clients;  // Z85 public keys; a client with any other key is refused
};

// Reads DIR/server.key and every DIR/clients/*.pub (see curve_keys.h). Errors name the file and
// the problem; a directory without any authorised client key is an error, since it would admit nobody.
StatusOr<CurveServerConfig> load_curve_server_config(const std::filesystem::path& dir);

// Checks a config assembled in code: keys well-formed, a secret present, at least one client.
Status validate(const CurveServerConfig& config);

}  // namespace sy::telemetry
