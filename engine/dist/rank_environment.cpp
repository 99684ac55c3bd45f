#include "engine/dist/rank_environment.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <string_view>

namespace sy::dist {
namespace {

StatusOr<std::int64_t> read_int(const char* name, const char* value, std::int64_t lo, std::int64_t hi) {
  std::int64_t v = 0;
  const char* end = value + std::char_traits<char>::length(value);
  const auto [p, ec] = std::from_chars(value, end, v);
  if (ec != std::errc{} || p != end || v < lo || v > hi)
    return Status::Error(std::string(name) + "='" + value + "': expected an integer in [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "]");
  return v;
}

// The ranks' endpoints are "tcp://ADDR:PORT" on IPv4 sockets: an IPv6 literal is neither
// bound nor reached (ZeroMQ needs it bracketed and the socket IPv6-enabled).
Status check_address(const char* name, const std::string& addr) {
  if (addr.find(':') != std::string::npos)
    return Status::Error(std::string(name) + "='" + addr +
                         "': IPv6 addresses are not supported between ranks; give an IPv4 address or a host name");
  // Ranks exchange tcp://ADDR:PORT endpoints and refuse any other (bootstrap_messages.h).
  if (!is_host_address(addr)) return Status::Error(std::string(name) + "='" + addr + "': not a host name or IPv4 address");
  return Status::Ok();
}

}  // namespace

bool is_loopback_address(const std::string& addr) { return addr == "localhost" || addr.rfind("127.", 0) == 0; }

bool is_host_address(std::string_view addr) {
  if (addr.empty()) return false;
  for (char c : addr)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') return false;
  return true;
}

StatusOr<RankEnvironment> RankEnvironment::from(const std::function<const char*(const char*)>& getenv) {
  RankEnvironment env;
  // The first launcher whose variables are all set wins; each names its rank, size, local rank.
  struct Launcher {
    const char* name;
    const char* rank;
    const char* size;
    const char* local;
  };
  static constexpr Launcher kLaunchers[] = {
      {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"env", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
  };
  for (const Launcher& l : kLaunchers) {
    const char* rank = getenv(l.rank);
    const char* size = getenv(l.size);
    if (!rank || !size) continue;
    auto world = read_int(l.size, size, 1, 1 << 16);
    if (!world.ok()) return world.status();
    auto r = read_int(l.rank, rank, 0, *world - 1);
    if (!r.ok()) return r.status();
    env.launcher = l.name;
    env.world = static_cast<std::int32_t>(*world);
    env.rank = static_cast<std::int32_t>(*r);
    if (const char* local = getenv(l.local)) {
      auto lr = read_int(l.local, local, 0, *world - 1);
      if (!lr.ok()) return lr.status();
      env.local_rank = static_cast<std::int32_t>(*lr);
    }
    break;
  }
  if (const char* addr = getenv("MASTER_ADDR"); addr && *addr) {
    env.master_addr = addr;
    if (Status s = check_address("MASTER_ADDR", env.master_addr); !s.ok()) return s;
  }
  if (const char* port = getenv("MASTER_PORT"); port && *port) {
    auto p = read_int("MASTER_PORT", port, 1, 65535);
    if (!p.ok()) return p.status();
    env.master_port = static_cast<std::uint16_t>(*p);
  }
  if (const char* t = getenv("SWITCHYARD_BOOTSTRAP_TIMEOUT"); t && *t) {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (end == t || *end != '\0' || !(v > 0) || v > 3600)
      return Status::Error(std::string("SWITCHYARD_BOOTSTRAP_TIMEOUT='") + t + "': expected seconds in (0, 3600]");
    env.bootstrap_timeout_s = v;
  }
  if (const char* t = getenv("SWITCHYARD_HEARTBEAT_TIMEOUT"); t && *t) {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (end == t || *end != '\0' || !(v >= 0.2) || v > 3600)
      return Status::Error(std::string("SWITCHYARD_HEARTBEAT_TIMEOUT='") + t + "': expected seconds in [0.2, 3600]");
    env.heartbeat_timeout_s = v;
  }
  if (const char* a = getenv("SWITCHYARD_ADVERTISE_ADDR"); a && *a) {
    env.advertise_addr = a;
    if (Status s = check_address("SWITCHYARD_ADVERTISE_ADDR", env.advertise_addr); !s.ok()) return s;
  } else if (!is_loopback_address(env.master_addr)) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0 && host[0]) env.advertise_addr = host;
  }
  // The keys matter only where sockets between ranks exist; a single process ignores them.
  if (!env.distributed()) return env;
  if (const char* v = getenv("SWITCHYARD_INSECURE"); v && *v) {
    if (std::string_view(v) != "1" && std::string_view(v) != "0")
      return Status::Error(std::string("SWITCHYARD_INSECURE='") + v + "': expected 1 (listen beyond loopback without "
                           "keys) or 0");
    env.insecure = *v == '1';
  }
  if (const char* dir = getenv("SWITCHYARD_KEYS"); dir && *dir) {
    auto keys = load_rank_keys(dir);
    if (!keys.ok()) return keys.status();
    env.keys = std::make_shared<const RankKeys>(std::move(*keys));
  } else if (env.listens_beyond_loopback() && !env.insecure) {
    const bool master = !is_loopback_address(env.master_addr);
    const std::string why = master ? "MASTER_ADDR='" + env.master_addr + "'"
                                   : "SWITCHYARD_ADVERTISE_ADDR='" + env.advertise_addr + "'";
    return Status::Error(why + " is not a loopback address, so the ranks would listen on every interface, and no "
                         "SWITCHYARD_KEYS is set: give every rank SWITCHYARD_KEYS=DIR, one key directory made by "
                         "`switchyard keys --out DIR --client rank` (only ranks with its keys get in), or "
                         "SWITCHYARD_INSECURE=1 to accept anyone who can reach the ports");
  }
  return env;
}

StatusOr<RankEnvironment> RankEnvironment::from_process() {
  return from([](const char* name) { return std::getenv(name); });
}

}  // namespace sy::dist
