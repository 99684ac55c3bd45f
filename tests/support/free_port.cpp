#include "tests/support/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <random>
#include <set>

namespace sy::test {
namespace {

bool binds(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

PortRange ephemeral_ports() {
  PortRange r;
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 0, last = 0;
  if (in >> first >> last && first > 0 && first <= last && last <= 65535) r = {first, last};
  return r;
}

int free_port() {
  // Below the ephemeral range (above 10000, clear of the well-known and registered services
  // most machines run), else above it. Random, so that tests started together rarely try the
  // same port; a port in use now is skipped.
  const PortRange eph = ephemeral_ports();
  int low = 10000, high = eph.first - 1;
  if (high - low < 1000) low = eph.last + 1, high = 65535;
  if (high - low < 1000) low = 1024, high = 65535;  // an odd range: any port that binds
  std::mt19937 pick(static_cast<unsigned>(::getpid()) ^
                    static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  std::uniform_int_distribution<int> port(low, high);
  // Nobody binds a port until the test starts its process: two picks of one test (telemetry
  // and control endpoints) must differ by themselves.
  static std::mutex mutex;
  static std::set<int> given;
  std::lock_guard lock(mutex);
  for (int tries = 0; tries < 200; ++tries) {
    const int p = port(pick);
    if ((p < eph.first || p > eph.last) && !given.count(p) && binds(p)) {
      given.insert(p);
      return p;
    }
  }
  return 29600 + static_cast<int>(::getpid() % 1000);
}

}  // namespace sy::test
