// The NCCL communicators between the GPUs of one process (ncclCommInitAll, one per GPU) with a
// communication stream per GPU: how the cuda backend moves rows from one GPU to another when a
// single process runs workers on several.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"

namespace sy {

class NcclLinks {
 public:
  // Communicators over `gpus` (distinct; at least two). Fails with NCCL's or CUDA's reason.
  static StatusOr<std::unique_ptr<NcclLinks>> create(std::vector<int> gpus);
  ~NcclLinks();
  NcclLinks(const NcclLinks&) = delete;
  NcclLinks& operator=(const NcclLinks&) = delete;

  // `floats` floats from device memory `from` on GPU `from_gpu` to `to` on GPU `to_gpu`.
  struct Move {
    const float* from = nullptr;
    int from_gpu = 0;
    float* to = nullptr;
    int to_gpu = 0;
    std::size_t floats = 0;
  };
  // Every move's send and receive in one NCCL group, issued by this one thread for both GPUs
  // (NCCL requires the group when one thread drives several communicators), on the GPUs'
  // communication streams; returns when all have landed. The sources must be complete (the
  // runtime ships rows only after the execution that wrote them completed, and the activation
  // copies synchronize), and the destinations are free for the receiver once this returns.
  void move(std::span<const Move> moves);

  const std::vector<int>& gpus() const { return gpus_; }

 private:
  explicit NcclLinks(std::vector<int> gpus) : gpus_(std::move(gpus)) {}
  std::size_t index(int gpu) const;  // the GPU's rank in the communicators

  std::vector<int> gpus_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
};

}  // namespace sy
