// A deployment on the cuda backend: every device of the topology is a worker on a GPU, with a
// CUDA stream of its own, so several workers (a disaggregated layout's attention and expert
// devices) may share one GPU, and one process may use several GPUs. What `--backend cuda` runs.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/cuda/device_model.h"
#include "engine/dist/device_links.h"
#include "engine/model/model_weights.h"
#include "engine/runtime/activation_ops.h"
#include "engine/serving/deployment.h"

namespace sy {

// Why no GPU can be used (the CUDA runtime's reason, or that cuBLAS cannot be loaded); empty
// when one can.
std::string cuda_backend_problem();

// The process's pool on `gpu` for rows that arrive from another process (through host
// memory) or another GPU (NCCL): every device on that GPU gathers from it as from its own.
// Made on first use, never freed.
ActivationOps& cuda_arrival_pool(int gpu);

// NCCL between this rank's GPU `gpu` and the other ranks' (NcclPeerLinks), for
// dist::DistributedRun::join under a launcher; `give_up_s` (the bootstrap timeout) bounds a
// join or a transfer with a live peer, `heartbeat_s` (the heartbeat timeout) how long an NCCL
// error waits for the heartbeats to say whether the peer died.
std::unique_ptr<dist::DeviceLinks> cuda_peer_links(int gpu, double give_up_s, double heartbeat_s);

// What the cuda backend adds to DeploymentOptions.
struct CudaDeploymentOptions {
  std::vector<int> device_gpu;  // the GPU of device d (empty: all on GPU 0)
  bool cuda_graphs = true;      // decode attention as CUDA graphs (CudaExecutorOptions::cuda_graphs)
};

class CudaDeployment final : public Deployment {
 public:
  // Fails with a message when no GPU can be used (the runtime's reason), when a device names
  // a GPU this machine lacks, when a rank of several (options.transport) would use more than
  // one GPU, when NCCL cannot join the GPUs, or when a GPU's weights and KV caches do not fit
  // (naming the GPU, its devices, the need and the free memory). Runs on the wall clock.
  // Only this process's devices run here; each GPU gets the weights its devices need. Rows
  // between two GPUs of this process go over NCCL (CudaTransport), rows to and from other
  // processes go over the process transport: NCCL to a rank on another GPU (NcclPeerLinks,
  // joined by DistributedRun), staged through pinned host memory to one on the same GPU.
  static StatusOr<std::unique_ptr<CudaDeployment>> create(std::shared_ptr<const ModelWeights> weights,
                                                          Topology topology, DeploymentOptions options,
                                                          CudaDeploymentOptions cuda = {});

 private:
  CudaDeployment(std::map<int, std::shared_ptr<const DeviceModel>> models, std::int64_t row_bytes, Topology topology,
                 DeploymentOptions options, CudaDeploymentOptions cuda, bool preload_kernels);
};

}  // namespace sy
