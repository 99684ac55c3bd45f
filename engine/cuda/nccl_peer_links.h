// NCCL between the GPUs of different ranks (processes) of a deployment: the cuda backend's
// DeviceLinks. One two-rank communicator per direction of each pair of ranks on different GPUs,
// joined with unique ids that rank 0 makes and the bootstrap carries (device_link_plan.h);
// ranks that share a GPU, or have none, stay host-staged.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/dist/device_links.h"

namespace sy {

class NcclPeerLinks final : public dist::DeviceLinks {
 public:
  // This rank's devices run on `gpu`; -1: the rank runs none (no memory, no links, but as
  // rank 0 it still makes every pair's ids). A join or transfer still unfinished after
  // `give_up_s` (the bootstrap timeout) fails naming the peer; `heartbeat_s` (the heartbeat
  // timeout) bounds how long an NCCL error waits for the heartbeats' word on the peer
  // (dist::LinkWait decides; docs/deployment.md, "Faults").
  NcclPeerLinks(int gpu, double give_up_s, double heartbeat_s = 0.6)
      : gpu_(gpu), give_up_s_(give_up_s), heartbeat_s_(heartbeat_s) {}
  ~NcclPeerLinks() override;
  NcclPeerLinks(const NcclPeerLinks&) = delete;
  NcclPeerLinks& operator=(const NcclPeerLinks&) = delete;

  // The GPU's UUID ("GPU-" and 32 hex digits, as nvidia-smi prints it), which tells two GPUs
  // apart across machines as an index cannot; empty when CUDA cannot say (no usable GPU: the
  // deployment then fails with the reason, and nothing is linked meanwhile).
  std::string memory() const override;
  // One ncclGetUniqueId per directed pair of device_link_pairs(memories), concatenated.
  StatusOr<std::string> setup(const std::vector<std::string>& memories) override;
  // A non-blocking ncclCommInitRankConfig for each pair this rank is in, in device_link_pairs'
  // order, each polled until joined or the bootstrap timeout (an error naming the rank that did
  // not join), then one float each way over each, in the same order, so that NCCL connects its
  // peers here and not amid serving (its lazy connection allocates device memory).
  Status connect(std::int32_t rank, const std::vector<std::string>& memories, const std::string& setup) override;

  bool linked(std::int32_t peer) const override { return to_.count(peer) > 0; }
  void peer_fault(std::int32_t peer, dist::PeerState state, const std::string& why) override;
  bool send(std::int32_t peer, std::span<const Activations* const> rows) override;
  bool receive(std::int32_t peer, std::span<Activations* const> rows, const std::function<void()>& waiting) override;

 private:
  struct Link {
    ncclComm_t comm = nullptr;  // rank 0 the sender, rank 1 the receiver; null once aborted
    cudaStream_t stream = nullptr;
    bool given_up = false;  // aborted after its peer was found dead: transfers on it are dropped
  };
  enum class Outcome { Done, PeerLost, Failed };
  // One group of ncclSend (sending) or ncclRecv on `link` with `peer`, polled until LinkWait
  // decides; `what` names it (and the peer) in messages, `why` says why it did not finish.
  // Only the thread that owns the link calls this (to_: the loop's, from_: the network's), so
  // the abort it may make never races a transfer on the same communicator.
  Outcome transfer(Link& link, std::int32_t peer, bool sending, std::span<float* const> data,
                   std::span<const std::size_t> floats, const std::string& what, const std::function<void()>* waiting,
                   std::string& why);
  // send/receive's end of a transfer: true when done; ends the process on Failed.
  static bool settle(Outcome outcome, const std::string& why);
  dist::PeerState peer_state(std::int32_t peer, std::string& why) const;

  int gpu_;
  double give_up_s_;
  double heartbeat_s_;
  // [rank]: PeerState, written by peer_fault from any thread; sized by connect().
  std::unique_ptr<std::atomic<std::uint8_t>[]> peer_states_;
  std::int32_t world_ = 0;
  mutable std::mutex reasons_mutex_;
  std::map<std::int32_t, std::string> reasons_;  // [rank]: peer_fault's why, under reasons_mutex_
  std::map<std::int32_t, Link> to_;    // [peer]: this rank sends to peer
  std::map<std::int32_t, Link> from_;  // [peer]: this rank receives from peer
};

}  // namespace sy
