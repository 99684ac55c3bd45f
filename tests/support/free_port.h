// A local TCP port nobody listens on right now, so tests running at the same time do not meet
// at one rendezvous or endpoint.
#pragma once

namespace sy::test {

// The kernel's pick for an ephemeral bind on 127.0.0.1; if that fails, a port derived from
// this process's id.
int free_port();

}  // namespace sy::test
