#include "engine/dist/rank_keys.h"

#include <algorithm>
#include <string>

namespace sy::dist {

StatusOr<RankKeys> load_rank_keys(const std::filesystem::path& dir) {
  const std::string var = "SWITCHYARD_KEYS='" + dir.string() + "': ";
  const std::string make = "`switchyard keys --out " + dir.string() + " --client " + std::string(kRankClientName) + "`";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return Status::Error(var + (std::filesystem::exists(dir, ec) ? "not a directory" : "no such directory") +
                         " (make the ranks' keys with " + make + ")");
  RankKeys keys;
  keys.dir = dir;
  auto server = telemetry::load_curve_server_config(dir);
  if (!server.ok()) return Status::Error(var + server.status().message());
  keys.server = std::move(*server);
  auto client = telemetry::load_client_keys(dir, kRankClientName);
  if (!client.ok()) return Status::Error(var + client.status().message() + " (the ranks' client pair: " + make + ")");
  keys.client = std::move(*client);
  // Both mistakes would only show as a bootstrap that times out: every handshake fails.
  if (keys.client.server_public_key != keys.server.server.public_key)
    return Status::Error(var + (dir / telemetry::kServerPublicFile).string() + " is not the public key of " +
                         (dir / telemetry::kServerKeyFile).string() + " (the ranks would refuse each other)");
  const auto& admitted = keys.server.authorized_clients;
  if (std::find(admitted.begin(), admitted.end(), keys.client.client.public_key) == admitted.end())
    return Status::Error(var + (dir / std::string(kRankClientName)).string() + ".key is not authorised: no " +
                         (dir / telemetry::kAuthorizedClientsDir / std::string(kRankClientName)).string() +
                         ".pub with its public key (the ranks would refuse each other; " + make + " makes both)");
  return keys;
}

}  // namespace sy::dist
