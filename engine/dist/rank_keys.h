// The CURVE keys on the sockets between the ranks of a deployment (SWITCHYARD_KEYS=DIR, one
// key directory as `switchyard keys` writes, the same on every rank): every listening socket is
// a CURVE server with DIR's server pair admitting DIR/clients/*.pub, every connecting socket a
// CURVE client with DIR/server.pub and the ranks' own client pair DIR/rank.key.
#pragma once

#include <filesystem>
#include <string_view>

#include "base/status.h"
#include "telemetry/curve_keys.h"
#include "telemetry/curve_server.h"

namespace sy::dist {

// The client pair every rank connects with: `switchyard keys --out DIR --client rank` makes it.
inline constexpr std::string_view kRankClientName = "rank";

struct RankKeys {
  std::filesystem::path dir;
  telemetry::CurveServerConfig server;  // DIR/server.key, DIR/clients/*.pub
  telemetry::CurveClientKeys client;    // DIR/server.pub, DIR/rank.key
};

// Reads and checks DIR. Every error starts with `SWITCHYARD_KEYS='DIR': ` and names the file and
// the problem: a missing directory or file, a malformed key, no authorised client, a server.pub
// that is not server.key's, or a rank pair the directory does not authorise (the ranks would
// refuse each other and the bootstrap would only time out).
StatusOr<RankKeys> load_rank_keys(const std::filesystem::path& dir);

}  // namespace sy::dist
