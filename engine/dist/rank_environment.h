// Which process of a multi-process deployment this is, as the launcher that started it says:
// OpenMPI's mpirun, Slurm's srun, or plain RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (torchrun,
// Kubernetes LeaderWorkerSet). Without any of them: one process, as always.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "engine/dist/rank_keys.h"

namespace sy::dist {

// Whether the ranks' sockets for this address stay on the loopback (127.0.0.1): "localhost" and
// 127.*; any other address binds every interface.
bool is_loopback_address(const std::string& addr);
// Whether `addr` is a host name or an IPv4 address as the ranks exchange them in their
// tcp://HOST:PORT endpoints: letters, digits, '.', '-' and '_', not empty.
bool is_host_address(std::string_view addr);

// Where rank 0 listens for the others when MASTER_PORT does not say (docs/deployment.md).
inline constexpr std::uint16_t kDefaultMasterPort = 29517;
// How long a rank waits for the bootstrap to complete (SWITCHYARD_BOOTSTRAP_TIMEOUT, seconds).
inline constexpr double kDefaultBootstrapTimeoutS = 30;

struct RankEnvironment {
  std::int32_t rank = 0;
  std::int32_t world = 1;
  std::int32_t local_rank = 0;
  std::string launcher = "none";  // "mpirun", "srun", "env" or "none"
  std::string master_addr = "127.0.0.1";
  std::uint16_t master_port = kDefaultMasterPort;
  // The address other ranks reach this one's data socket at (SWITCHYARD_ADVERTISE_ADDR; else
  // the loopback address when rank 0 is on the loopback, else this host's name).
  std::string advertise_addr = "127.0.0.1";
  double bootstrap_timeout_s = kDefaultBootstrapTimeoutS;
  // Silence after which a rank counts as dead (SWITCHYARD_HEARTBEAT_TIMEOUT, seconds); with
  // heartbeats every 0.1 s a killed rank is noticed within this plus 0.1 s.
  double heartbeat_timeout_s = 0.6;
  // SWITCHYARD_KEYS: CURVE on every socket between the ranks (rank_keys.h); null without. Read
  // only in a world above 1.
  std::shared_ptr<const RankKeys> keys;
  // SWITCHYARD_INSECURE=1: the ranks may listen beyond loopback without keys.
  bool insecure = false;

  bool distributed() const { return world > 1; }
  // Whether the ranks talk beyond loopback: MASTER_ADDR (where rank 0's bootstrap socket
  // listens, on every interface) or the advertised address (where this rank's data socket
  // listens, on every interface) is not a loopback address.
  bool listens_beyond_loopback() const {
    return !is_loopback_address(master_addr) || !is_loopback_address(advertise_addr);
  }
  std::string master_endpoint() const { return "tcp://" + master_addr + ":" + std::to_string(master_port); }

  // Reads the launcher's variables through `getenv` (null when unset), and in a world above 1
  // the key directory SWITCHYARD_KEYS names. Errors name the variable and its bad value (a rank
  // outside the world, a port out of range, a key file that is missing or malformed, ...).
  // Secure by default: in a world above 1 whose sockets would listen beyond loopback, neither
  // SWITCHYARD_KEYS nor SWITCHYARD_INSECURE=1 is an error that names all three variables.
  static StatusOr<RankEnvironment> from(const std::function<const char*(const char*)>& getenv);
  static StatusOr<RankEnvironment> from_process();
};

}  // namespace sy::dist
