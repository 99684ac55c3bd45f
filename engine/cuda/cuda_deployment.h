// A deployment on the cuda backend: every device of the topology is a worker on a GPU, with a
// CUDA stream of its own, so several workers (a disaggregated layout's attention and expert
// devices) may share one GPU. What `--backend cuda` runs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/cuda/device_model.h"
#include "engine/model/model_weights.h"
#include "engine/serving/deployment.h"

namespace sy {

// Why no GPU can be used (the CUDA runtime's reason, or that cuBLAS cannot be loaded); empty
// when one can.
std::string cuda_backend_problem();

// What the cuda backend adds to DeploymentOptions.
struct CudaDeploymentOptions {
  std::vector<int> device_gpu;  // the GPU of device d (empty: all on GPU 0)
  bool cuda_graphs = true;      // decode attention as CUDA graphs (CudaExecutorOptions::cuda_graphs)
};

class CudaDeployment final : public Deployment {
 public:
  // Fails with a message when no
  // GPU can be used (the runtime's reason), when devices sit on different GPUs (transfers
  // between GPUs are not written yet), or when a GPU's weights and KV caches do not fit
  // (naming the GPU, its devices, the need and the free memory). Runs on the wall clock.
  static StatusOr<std::unique_ptr<CudaDeployment>> create(std::shared_ptr<const ModelWeights> weights,
                                                          Topology topology, DeploymentOptions options,
                                                          CudaDeploymentOptions cuda = {});

 private:
  CudaDeployment(std::shared_ptr<const DeviceModel> model, Topology topology, DeploymentOptions options,
                 CudaDeploymentOptions cuda);
};

}  // namespace sy
