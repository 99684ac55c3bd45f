#include "engine/cuda/cuda_deployment.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "engine/cuda/cuda_executor.h"
#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/cuda_kernels.h"

namespace sy {
namespace {

// Scratch of one worker beyond its activations: a generous bound for the batches a step
// builds (the fit check errs towards refusing rather than failing mid-run).
std::int64_t scratch_bytes(const ModelConfig& c) {
  const std::int64_t rows = 2048;
  const std::int64_t widest = std::max<std::int64_t>({c.hidden_size, static_cast<std::int64_t>(c.num_heads) * c.head_dim,
                                                      c.moe_intermediate_size, c.intermediate_size});
  return rows * widest * 4 * 8 + 8 * static_cast<std::int64_t>(c.vocab_size) * 4 * 4;
}

Cluster::ExecutorFactory cuda_executors(std::shared_ptr<const DeviceModel> model, const DeploymentOptions& options,
                                        std::vector<int> device_gpu, bool cuda_graphs) {
  return [model, device_gpu, kv_pages = options.kv_pages_per_rank, page_size = options.page_size, cuda_graphs](
             std::int32_t device, bool attention_rank, EventLoop& loop) {
    CudaExecutorOptions o;
    o.gpu = device_gpu.empty() ? 0 : device_gpu[static_cast<std::size_t>(device)];
    o.device = device;
    o.attention_rank = attention_rank;
    o.kv_pages = kv_pages;
    o.page_size = page_size;
    o.cuda_graphs = cuda_graphs;
    return std::unique_ptr<Executor>(std::make_unique<CudaExecutor>(model, o, loop));
  };
}

}  // namespace

std::string cuda_backend_problem() {
  if (std::string problem = kernels::cuda_device_problem(); !problem.empty()) return problem;
  return kernels::cublas_library_problem();
}

StatusOr<std::unique_ptr<CudaDeployment>> CudaDeployment::create(std::shared_ptr<const ModelWeights> weights,
                                                                 Topology topology, DeploymentOptions options,
                                                                 CudaDeploymentOptions cuda) {
  const std::vector<int>& device_gpu = cuda.device_gpu;
  if (!kernels::cuda_device_available())
    return Status::Error("--backend cuda: no usable GPU (" + kernels::cuda_device_problem() + ")");
  if (!device_gpu.empty() && static_cast<std::int32_t>(device_gpu.size()) != topology.num_devices)
    return Status::Error("cuda deployment: " + std::to_string(device_gpu.size()) + " GPU assignments for " +
                         std::to_string(topology.num_devices) + " devices");
  const int gpu = device_gpu.empty() ? 0 : device_gpu.front();
  for (std::size_t d = 0; d < device_gpu.size(); ++d)
    if (device_gpu[d] != gpu)
      return Status::Error("device " + topology.device_names[d] + " is on gpu " + std::to_string(device_gpu[d]) +
                           " and device " + topology.device_names[0] + " on gpu " + std::to_string(gpu) +
                           ": the cuda backend runs every device of a layout on one GPU for now (transfers "
                           "between GPUs are not written yet)");
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || gpu < 0 || gpu >= count)
    return Status::Error("gpu " + std::to_string(gpu) + " does not exist (this machine has " + std::to_string(count) +
                         " GPUs)");
  if (options.skew_lambda || options.skew_routing || options.routing_trace)
    return Status::Error("--backend cuda routes with the model's router: routing skew and replayed routing are "
                         "sim and cpu options");
  if (options.transport)
    return Status::Error("--backend cuda runs in one process for now (multi-process transports are cpu and sim)");

  const ModelConfig& c = weights->config();
  DeviceModelNeeds needs;
  std::int32_t attention_ranks = 0;
  for (std::int32_t d = 0; d < topology.num_devices; ++d)
    if (topology.device_rank[static_cast<std::size_t>(d)] >= 0) ++attention_ranks;
  needs.attention = attention_ranks > 0;
  // Every expert: the GPU is shared by all devices, so live placement changes need no upload.
  needs.experts.assign(static_cast<std::size_t>(c.num_layers), std::vector<bool>(static_cast<std::size_t>(c.num_experts), true));
  needs.other_bytes = attention_ranks * (CudaExecutor::kv_bytes(c, options.kv_pages_per_rank, options.page_size) +
                                         CudaExecutor::fixed_bytes(c, true, options.kv_pages_per_rank)) +
                      (topology.num_devices - attention_ranks) * CudaExecutor::fixed_bytes(c, false, 0) +
                      topology.num_devices * scratch_bytes(c);
  needs.who = "gpu " + std::to_string(gpu) + " (";
  for (std::int32_t d = 0; d < topology.num_devices; ++d)
    needs.who += (d ? ", " : "") + topology.device_names[static_cast<std::size_t>(d)];
  needs.who += ")";
  auto model = DeviceModel::upload(*weights, gpu, needs);
  if (!model.ok()) return model.status();
  options.clock = Clock::Wall;  // completions come from the GPU's streams, in real time
  return std::unique_ptr<CudaDeployment>(
      new CudaDeployment(std::move(*model), std::move(topology), std::move(options), std::move(cuda)));
}

CudaDeployment::CudaDeployment(std::shared_ptr<const DeviceModel> model, Topology topology, DeploymentOptions options,
                               CudaDeploymentOptions cuda)
    // float32 activations cross between workers (device-to-device on one GPU).
    : Deployment(std::move(topology), options, static_cast<std::int64_t>(model->config().hidden_size) * 4,
                 cuda_executors(model, options, std::move(cuda.device_gpu), cuda.cuda_graphs)) {}

}  // namespace sy
