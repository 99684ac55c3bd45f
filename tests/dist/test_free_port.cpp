// The port the multi-process tests hand to rank 0 as MASTER_PORT: free when picked, and never
// one the kernel could give meanwhile to any socket bound to port 0 or connecting out (the
// ranks' own data sockets, mpirun's, another test's), which would take rank 0's rendezvous.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "tests/support/free_port.h"

namespace sy::test {
namespace {

TEST(FreePort, IsOutsideTheEphemeralRangeAndBinds) {
  const PortRange eph = ephemeral_ports();
  std::set<int> seen;
  for (int i = 0; i < 20; ++i) {
    const int port = free_port();
    seen.insert(port);
    EXPECT_TRUE(port < eph.first || port > eph.last)
        << port << " is in the ephemeral range " << eph.first << "-" << eph.last;
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << port;
    ::close(fd);
  }
  // One test's picks (a telemetry and a control endpoint) are bound only later: all differ.
  EXPECT_EQ(seen.size(), 20u);
}

}  // namespace
}  // namespace sy::test
