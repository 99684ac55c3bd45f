// Where the console connects: the engine's telemetry and control endpoints and, for an engine
// that listens beyond loopback, the CURVE key files (docs/telemetry-protocol.md).
#pragma once

#include <optional>
#include <string>

#include "telemetry/curve_keys.h"
#include "base/status.h"

namespace sy::console {

struct ConnectionSettings {
  std::string telemetry_endpoint = "tcp://127.0.0.1:5555";
  std::string control_endpoint = "tcp://127.0.0.1:5556";
  // CURVE, from a key directory written by `switchyard keys` (DIR/server.pub and
  // DIR/<client_name>.key), or from the two files named directly. All empty: a plain connection.
  std::string key_dir;
  std::string client_name = "client";
  std::string server_key_file;
  std::string client_key_file;

  bool uses_curve() const { return !key_dir.empty() || !server_key_file.empty() || !client_key_file.empty(); }
  // Reads the key files; errors name the file and the problem.
  StatusOr<std::optional<telemetry::CurveClientKeys>> load_keys() const;
};

}  // namespace sy::console
