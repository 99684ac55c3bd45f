#include "console/app/connection_settings.h"

namespace sy::console {

StatusOr<std::optional<telemetry::CurveClientKeys>> ConnectionSettings::load_keys() const {
  if (!uses_curve()) return std::optional<telemetry::CurveClientKeys>();
  if (!key_dir.empty()) {
    if (!server_key_file.empty() || !client_key_file.empty())
      return Status::Error("give either a key directory or the two key files, not both");
    auto keys = telemetry::load_client_keys(key_dir, client_name);
    if (!keys.ok()) return keys.status();
    return std::optional<telemetry::CurveClientKeys>(std::move(*keys));
  }
  if (server_key_file.empty()) return Status::Error("CURVE needs the server's public key file");
  if (client_key_file.empty()) return Status::Error("CURVE needs this client's key file (public and secret key)");
  auto server = telemetry::read_key_file(server_key_file);
  if (!server.ok()) return server.status();
  auto client = telemetry::read_key_file(client_key_file);
  if (!client.ok()) return client.status();
  if (client->secret_key.empty())
    return Status::Error("client key file " + client_key_file + " holds no secret key");
  telemetry::CurveClientKeys keys;
  keys.server_public_key = server->public_key;
  keys.client = *client;
  return std::optional<telemetry::CurveClientKeys>(std::move(keys));
}

}  // namespace sy::console
