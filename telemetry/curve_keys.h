// ZeroMQ CURVE key pairs for the telemetry and control sockets when they listen beyond
// loopback: generation (`switchyard keys`), the key files, and what a client needs to connect.
#pragma once

#include <filesystem>
#include <string>

#include "telemetry/status.h"

namespace sy::telemetry {

// Z85 text, 40 characters each, as zmq_curve_keypair() makes them.
struct CurveKeyPair {
  std::string public_key;
  std::string secret_key;
};

CurveKeyPair generate_curve_keypair();

// A key file holds one pair (or only a public key) as `public = "…"` / `secret = "…"` lines;
// docs/telemetry-protocol.md gives the format. Written with mode 0600 when it holds a secret.
Status write_key_file(const std::filesystem::path& path, const CurveKeyPair& keys, bool include_secret);
// Errors name the file and what is wrong with it (missing, unreadable, malformed key).
StatusOr<CurveKeyPair> read_key_file(const std::filesystem::path& path);

// What a client (console, tests, scripts) needs for a CURVE connection: the server's public
// key and its own pair, which the server must have in its list of authorised client keys.
struct CurveClientKeys {
  std::string server_public_key;
  CurveKeyPair client;
};

}  // namespace sy::telemetry
