// A local TCP port nobody listens on right now, so tests running at the same time do not meet
// at one rendezvous or endpoint.
#pragma once

namespace sy::test {

// A port outside the kernel's ephemeral range (net.ipv4.ip_local_port_range) that binds on
// every interface now; if none does, a port derived from this process's id. Outside that
// range on purpose: the test hands the port to a process that binds it later (rank 0's
// MASTER_PORT), and meanwhile any bind to port 0 or outgoing connection on the machine (the
// ranks' own data sockets, mpirun's, a test running beside) could be given an ephemeral one.
int free_port();

// The kernel's ephemeral range, [first, last] (32768-60999 when it cannot be read).
struct PortRange {
  int first = 32768;
  int last = 60999;
};
PortRange ephemeral_ports();

}  // namespace sy::test
