// `switchyard keys --out DIR`: generates the ZeroMQ CURVE keys that let the telemetry and
// control sockets listen beyond loopback (docs/telemetry-protocol.md, "CURVE"), and, with
// `--client rank`, the sockets between the ranks of a deployment (SWITCHYARD_KEYS=DIR,
// docs/deployment.md).
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/dist/rank_keys.h"
#include "telemetry/curve_keys.h"

namespace sy::cli {
namespace {

struct KeysArgs {
  std::filesystem::path out;
  std::string client = "client";
  bool force = false;
};

bool valid_client_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "server") return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) {
      return false;
    }
  }
  return true;
}

void run(const KeysArgs& a) {
  namespace fs = std::filesystem;
  if (!valid_client_name(a.client)) {
    throw CommandError{"--client '" + a.client + "': use letters, digits, '-' and '_' (not 'server')"};
  }
  const fs::path server_key = a.out / telemetry::kServerKeyFile;
  const fs::path server_pub = a.out / telemetry::kServerPublicFile;
  const fs::path clients = a.out / telemetry::kAuthorizedClientsDir;
  const fs::path client_key = a.out / (a.client + ".key");
  const fs::path client_pub = clients / (a.client + ".pub");
  std::error_code ec;
  const bool have_server = fs::exists(server_key, ec);
  if (fs::exists(client_key, ec) && !a.force) {
    throw CommandError{client_key.string() + " exists; pick another --client NAME to add a client, or --force to "
                       "replace the keys"};
  }
  fs::create_directories(clients, ec);
  if (ec) throw CommandError{clients.string() + ": cannot create: " + ec.message()};
  // The directory holds secrets: only its owner may list it.
  ::chmod(a.out.c_str(), 0700);

  std::vector<std::string> wrote;
  if (!have_server || a.force) {
    const telemetry::CurveKeyPair server = telemetry::generate_curve_keypair();
    check(telemetry::write_key_file(server_key, server, true));
    check(telemetry::write_key_file(server_pub, server, false));
    wrote.push_back(server_key.string() + "   the engine's key pair (secret; --keys " + a.out.string() + ")");
    wrote.push_back(server_pub.string() + "   the engine's public key (give to every client)");
  } else if (!fs::exists(server_pub, ec)) {
    auto server = telemetry::read_key_file(server_key);
    check(server.status());
    check(telemetry::write_key_file(server_pub, *server, false));
  }
  const telemetry::CurveKeyPair client = telemetry::generate_curve_keypair();
  check(telemetry::write_key_file(client_key, client, true));
  check(telemetry::write_key_file(client_pub, client, false));
  wrote.push_back(client_key.string() + "   client '" + a.client + "' key pair (secret; give to that client)");
  wrote.push_back(client_pub.string() + "   authorises client '" + a.client + "' (delete it to revoke)");
  for (const auto& line : wrote) std::printf("wrote %s\n", line.c_str());
  if (a.client == dist::kRankClientName) {
    std::printf("ranks:   SWITCHYARD_KEYS=%s for every rank of the deployment (copy the directory to every node; "
                "every key in %s is admitted)\n",
                a.out.string().c_str(), clients.string().c_str());
    return;
  }
  std::printf("engine:  switchyard demo --telemetry tcp://*:5555 --control tcp://*:5556 --keys %s\n"
              "client:  a directory with server.pub and %s.key (the console's --keys DIR)\n",
              a.out.string().c_str(), a.client.c_str());
}

}  // namespace

void register_keys(CLI::App& app) {
  auto args = std::make_shared<KeysArgs>();
  CLI::App* sub = app.add_subcommand(
      "keys", "Generate CURVE keys for telemetry, control and the sockets between ranks beyond loopback");
  sub->add_option("--out", args->out, "Key directory (created; existing server keys are kept)")->required();
  sub->add_option("--client", args->client,
                  "Name of the client key pair to add ('rank': the pair the ranks connect with, SWITCHYARD_KEYS)")
      ->capture_default_str();
  sub->add_flag("--force", args->force, "Replace the server key pair and an existing client of that name");
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
