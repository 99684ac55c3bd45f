#include "engine/cuda/cuda_deployment.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>

#include "engine/cuda/cuda_activation_ops.h"
#include "engine/cuda/cuda_executor.h"
#include "engine/cuda/cuda_transport.h"
#include "engine/cuda/gpu_assignment.h"
#include "engine/dist/zmq_transport.h"
#include "engine/runtime/loop_transport.h"
#include "kernels/cuda/cublas_library.h"
#include "kernels/cuda/cuda_kernels.h"

namespace sy {
namespace {

using GpuModels = std::map<int, std::shared_ptr<const DeviceModel>>;

Cluster::ExecutorFactory cuda_executors(GpuModels models, const DeploymentOptions& options, std::vector<int> device_gpu,
                                        bool cuda_graphs, bool preload_kernels) {
  return [models = std::move(models), device_gpu, kv_pages = options.kv_pages_per_rank, page_size = options.page_size,
          cuda_graphs, preload_kernels](std::int32_t device, bool attention_rank, EventLoop& loop) {
    CudaExecutorOptions o;
    o.gpu = gpu_of(device_gpu, device);
    o.device = device;
    o.attention_rank = attention_rank;
    o.kv_pages = kv_pages;
    o.page_size = page_size;
    o.cuda_graphs = cuda_graphs;
    o.preload_kernels = preload_kernels;
    return std::unique_ptr<Executor>(std::make_unique<CudaExecutor>(models.at(o.gpu), o, loop));
  };
}

}  // namespace

std::string cuda_backend_problem() {
  if (std::string problem = kernels::cuda_device_problem(); !problem.empty()) return problem;
  return kernels::cublas_library_problem();
}

ActivationOps& cuda_arrival_pool(int gpu) {
  // Never freed, like the transport's host arrival pool: handles of it may outlive any one
  // deployment (token pools, recycled batches; bench serves several in turn).
  static std::mutex mutex;
  static std::map<int, CudaActivationOps*> pools;
  std::lock_guard lock(mutex);
  CudaActivationOps*& pool = pools[gpu];
  if (!pool) pool = new CudaActivationOps(gpu);
  return *pool;
}

StatusOr<std::unique_ptr<CudaDeployment>> CudaDeployment::create(std::shared_ptr<const ModelWeights> weights,
                                                                 Topology topology, DeploymentOptions options,
                                                                 CudaDeploymentOptions cuda) {
  const std::vector<int>& device_gpu = cuda.device_gpu;
  if (!kernels::cuda_device_available())
    return Status::Error("--backend cuda: no usable GPU (" + kernels::cuda_device_problem() + ")");
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess)
    return Status::Error(std::string("--backend cuda: cudaGetDeviceCount: ") + cudaGetErrorString(e));
  // Only this process's devices run here (all of them without a launcher).
  const bool across_processes = static_cast<bool>(options.transport);
  SY_RETURN_IF_ERROR(check_gpus(topology, device_gpu, options.process, count, across_processes));
  if (options.skew_lambda || options.skew_routing || options.routing_trace)
    return Status::Error("--backend cuda routes with the model's router: routing skew and replayed routing are "
                         "sim and cpu options");

  // Each GPU gets the weights of the devices it runs, after its own fit check.
  const std::vector<int> gpus = process_gpus(topology, device_gpu, options.process);
  GpuModels models;
  for (const int gpu : gpus) {
    const DeviceModelNeeds needs = gpu_needs(weights->config(), topology, device_gpu, options.process, gpu,
                                             options.kv_pages_per_rank, options.page_size);
    auto model = DeviceModel::upload(*weights, gpu, needs);
    if (!model.ok()) return model.status();
    models.emplace(gpu, std::move(*model));
  }
  const std::int64_t row_bytes = static_cast<std::int64_t>(weights->config().hidden_size) * 4;

  if (across_processes) {
    // Across processes rows travel through host memory: those arriving for a device of this
    // process land in its GPU's arrival pool (a transport that passes handles as they are
    // is in-process and needs none).
    std::vector<std::pair<std::int32_t, int>> local;
    for (std::int32_t d = 0; d < topology.num_devices; ++d)
      if (topology.process_of(d) == options.process) local.emplace_back(d, gpu_of(device_gpu, d));
    options.transport = [inner = std::move(options.transport), local](EventLoop& loop, std::int32_t num_devices,
                                                                       RuntimeObserver* observer) {
      std::unique_ptr<Transport> t = inner(loop, num_devices, observer);
      if (auto* zmq = dynamic_cast<dist::ZmqTransport*>(t.get()))
        for (const auto& [d, gpu] : local) zmq->set_arrivals(d, &cuda_arrival_pool(gpu));
      return t;
    };
  } else if (gpus.size() > 1) {
    // One communicator set for the deployment; rows between its GPUs go over NCCL.
    auto links = NcclLinks::create(gpus);
    if (!links.ok()) return links.status();
    std::vector<int> all(static_cast<std::size_t>(topology.num_devices));
    for (std::int32_t d = 0; d < topology.num_devices; ++d) all[static_cast<std::size_t>(d)] = gpu_of(device_gpu, d);
    options.transport = [shared = std::shared_ptr<NcclLinks>(std::move(*links)), all, row_bytes,
                         link = options.link](EventLoop& loop, std::int32_t num_devices, RuntimeObserver* observer) {
      return std::unique_ptr<Transport>(std::make_unique<CudaTransport>(
          std::make_unique<LoopTransport>(loop, num_devices, row_bytes, link, observer), all, shared));
    };
  }
  options.clock = Clock::Wall;  // completions come from the GPU's streams, in real time
  // Where NCCL may carry rows (between this process's GPUs, or to other ranks' under a
  // launcher), every kernel is loaded before serving (CudaExecutorOptions::preload_kernels).
  const bool preload_kernels = across_processes || gpus.size() > 1;
  return std::unique_ptr<CudaDeployment>(new CudaDeployment(std::move(models), row_bytes, std::move(topology),
                                                            std::move(options), std::move(cuda), preload_kernels));
}

CudaDeployment::CudaDeployment(std::map<int, std::shared_ptr<const DeviceModel>> models, std::int64_t row_bytes,
                               Topology topology, DeploymentOptions options, CudaDeploymentOptions cuda,
                               bool preload_kernels)
    // float32 activations cross between workers.
    : Deployment(std::move(topology), options, row_bytes,
                 cuda_executors(std::move(models), options, std::move(cuda.device_gpu), cuda.cuda_graphs,
                                preload_kernels)) {}

}  // namespace sy
