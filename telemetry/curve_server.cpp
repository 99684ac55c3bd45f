#include "telemetry/curve_server.h"

#include <algorithm>

namespace sy::telemetry {

Status validate(const CurveServerConfig& config) {
  if (!is_valid_curve_key(config.server.public_key)) return Status::Error("CURVE server public key is not a Z85 key");
  if (!is_valid_curve_key(config.server.secret_key)) {
    return Status::Error("CURVE server secret key is missing or not a Z85 key");
  }
  if (config.authorized_clients.empty()) return Status::Error("CURVE config authorises no client key");
  for (const std::string& key : config.authorized_clients) {
    if (!is_valid_curve_key(key)) return Status::Error("authorised client key '" + key + "' is not a Z85 CURVE key");
  }
  return Status::Ok();
}

StatusOr<CurveServerConfig> load_curve_server_config(const std::filesystem::path& dir) {
  CurveServerConfig config;
  const std::filesystem::path server_path = dir / kServerKeyFile;
  auto server = read_key_file(server_path);
  if (!server.ok()) return server.status();
  if (server->secret_key.empty()) return Status::Error(server_path.string() + ": holds no secret key");
  config.server = *server;

  const std::filesystem::path clients = dir / kAuthorizedClientsDir;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (std::filesystem::directory_iterator it(clients, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".pub") files.push_back(it->path());
  }
  if (ec) return Status::Error(clients.string() + ": cannot list authorised client keys: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto key = read_key_file(f);
    if (!key.ok()) return key.status();
    config.authorized_clients.push_back(key->public_key);
  }
  if (config.authorized_clients.empty()) {
    return Status::Error(clients.string() + ": no authorised client keys (*.pub); `switchyard keys --out " +
                         dir.string() + " --client NAME` adds one");
  }
  return config;
}

}  // namespace sy::telemetry
