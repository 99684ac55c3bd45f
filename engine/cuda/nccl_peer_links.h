// NCCL between the GPUs of different ranks (processes) of a deployment: the cuda backend's
// DeviceLinks. One two-rank communicator per direction of each pair of ranks on different GPUs,
// joined with unique ids that rank 0 makes and the bootstrap carries (device_link_plan.h);
// ranks that share a GPU, or have none, stay host-staged.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/dist/device_links.h"

namespace sy {

class NcclPeerLinks final : public dist::DeviceLinks {
 public:
  // This rank's devices run on `gpu`; -1: the rank runs none (no memory, no links, but as
  // rank 0 it still makes every pair's ids). A transfer still unfinished after `give_up_s` (the
  // bootstrap timeout) ends the process naming the peer, rather than hang on a dead rank.
  NcclPeerLinks(int gpu, double give_up_s) : gpu_(gpu), give_up_s_(give_up_s) {}
  ~NcclPeerLinks() override;
  NcclPeerLinks(const NcclPeerLinks&) = delete;
  NcclPeerLinks& operator=(const NcclPeerLinks&) = delete;

  // The GPU's UUID ("GPU-" and 32 hex digits, as nvidia-smi prints it), which tells two GPUs
  // apart across machines as an index cannot; empty when CUDA cannot say (no usable GPU: the
  // deployment then fails with the reason, and nothing is linked meanwhile).
  std::string memory() const override;
  // One ncclGetUniqueId per directed pair of device_link_pairs(memories), concatenated.
  StatusOr<std::string> setup(const std::vector<std::string>& memories) override;
  // ncclCommInitRank for each pair this rank is in, in device_link_pairs' order, then one
  // float each way over each, in the same order, so that NCCL connects its peers here and not
  // amid serving (its lazy connection allocates device memory).
  Status connect(std::int32_t rank, const std::vector<std::string>& memories, const std::string& setup) override;

  bool linked(std::int32_t peer) const override { return to_.count(peer) > 0; }
  void send(std::int32_t peer, std::span<const Activations* const> rows) override;
  void receive(std::int32_t peer, std::span<Activations* const> rows) override;

 private:
  struct Link {
    ncclComm_t comm = nullptr;  // rank 0 the sender, rank 1 the receiver
    cudaStream_t stream = nullptr;
  };
  // One group of ncclSend (sending) or ncclRecv on `link`, waited for; `what` names it (and
  // the peer) in the message of a failure.
  void transfer(const Link& link, bool sending, std::span<float* const> data, std::span<const std::size_t> floats,
                const std::string& what);

  int gpu_;
  double give_up_s_;
  std::map<std::int32_t, Link> to_;    // [peer]: this rank sends to peer
  std::map<std::int32_t, Link> from_;  // [peer]: this rank receives from peer
};

}  // namespace sy
