// Activation rows between the device memories of two ranks without host staging (NCCL between
// GPUs on the cuda backend), behind an interface so that engine/dist links no GPU library: a
// backend implements it, the bootstrap carries what it needs to connect (LinkExchange), and
// ZmqTransport sends the rows of a shipment between linked ranks through it while the header
// and the payload's metadata still go over ZeroMQ (docs/architecture.md, docs/wire-format.md).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/dist/link_wait.h"
#include "engine/runtime/activation_ops.h"

namespace sy::dist {

class DeviceLinks {
 public:
  virtual ~DeviceLinks() = default;

  // Before the bootstrap: what names this rank's device memory to the others (a GPU's UUID);
  // empty: none, every rank's rows to and from this one are host-staged (device_link_plan.h).
  virtual std::string memory() const = 0;
  // Rank 0, during the bootstrap, with every rank's memory: what every rank connects with
  // (one NCCL unique id per directed pair of device_link_pairs()), carried in the Welcome.
  virtual StatusOr<std::string> setup(const std::vector<std::string>& memories) = 0;
  // Every rank, right after the bootstrap, with every rank's memory and rank 0's setup: joins
  // this rank's pairs, blocking until their other ends have joined too.
  virtual Status connect(std::int32_t rank, const std::vector<std::string>& memories, const std::string& setup) = 0;

  // Whether rows from this rank to `peer`, or from `peer` to this rank, take these links
  // (after connect(); the same answer at both ends).
  virtual bool linked(std::int32_t peer) const = 0;
  // Any thread (the network thread's heartbeats, a LinkRefused message): what this rank now
  // knows of `peer` apart from the links. A transfer with it that is waiting, and every later
  // one, ends as LinkWait decides (docs/deployment.md, "Faults").
  virtual void peer_fault(std::int32_t peer, PeerState state, const std::string& why) = 0;

  // The event loop's thread: each of `rows` to `peer`, after every earlier send to `peer`,
  // matched in order by its receive() calls. Returns once the rows have left (the sources may
  // go back to their pool): true; false: the peer was found dead and the rows are dropped (the
  // lost-rank path fails their requests). Ends the process, naming the peer and why, when the
  // link fails while the peer lives (an NCCL error, the bootstrap timeout, a refusal). The
  // rows must be complete (the runtime ships rows only after the execution that wrote them
  // completed).
  virtual bool send(std::int32_t peer, std::span<const Activations* const> rows) = 0;
  // The network thread: into `rows` (allocated beforehand by the receiving backend, their
  // shapes from the payload's metadata) from `peer`, in the order `peer` sent them. Returns
  // once they have landed (true), or false and ends as send() does; calls `waiting` about
  // every millisecond meanwhile (ProcessLinks::pump: heartbeats both ways).
  virtual bool receive(std::int32_t peer, std::span<Activations* const> rows, const std::function<void()>& waiting) = 0;
};

}  // namespace sy::dist
