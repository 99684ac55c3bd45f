// ZeroMQ CURVE key pairs for the telemetry and control sockets when they listen beyond
// loopback: generation (`switchyard keys`), the key files, and what a client needs to connect.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "base/status.h"

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

// True when `key` is 40 characters of Z85 that decode to a 32-byte CURVE key.
bool is_valid_curve_key(std::string_view key);

// The key directory `switchyard keys --out DIR` writes (docs/telemetry-protocol.md, "CURVE"):
//   DIR/server.key           the server's pair (0600): the engine's --keys DIR
//   DIR/server.pub           the server's public key: copy to every client
//   DIR/<client>.key         a client's pair (0600): the console's --keys DIR
//   DIR/clients/<client>.pub the client's public key: the engine admits every key in DIR/clients/
inline constexpr std::string_view kServerKeyFile = "server.key";
inline constexpr std::string_view kServerPublicFile = "server.pub";
inline constexpr std::string_view kAuthorizedClientsDir = "clients";

// A client's keys from a key directory: DIR/server.pub and DIR/<client_name>.key.
StatusOr<CurveClientKeys> load_client_keys(const std::filesystem::path& dir, std::string_view client_name = "client");

}  // namespace sy::telemetry
