#include "engine/cuda/gpu_assignment.h"

#include <algorithm>
#include <string>

#include "engine/cuda/cuda_executor.h"

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

}  // namespace

int gpu_of(const std::vector<int>& device_gpu, std::int32_t device) {
  return device_gpu.empty() ? 0 : device_gpu[static_cast<std::size_t>(device)];
}

TransferPath transfer_path(const Topology& topology, const std::vector<int>& device_gpu, std::int32_t src,
                           std::int32_t dst) {
  if (topology.process_of(src) != topology.process_of(dst)) return TransferPath::BetweenProcesses;
  return gpu_of(device_gpu, src) == gpu_of(device_gpu, dst) ? TransferPath::SameGpu : TransferPath::BetweenGpus;
}

std::vector<int> process_gpus(const Topology& topology, const std::vector<int>& device_gpu, std::int32_t process) {
  std::vector<int> gpus;
  for (std::int32_t d = 0; d < topology.num_devices; ++d)
    if (topology.process_of(d) == process) gpus.push_back(gpu_of(device_gpu, d));
  std::sort(gpus.begin(), gpus.end());
  gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  return gpus;
}

Status check_gpus(const Topology& topology, const std::vector<int>& device_gpu, std::int32_t process, int gpu_count,
                  bool across_processes) {
  if (!device_gpu.empty() && static_cast<std::int32_t>(device_gpu.size()) != topology.num_devices)
    return Status::Error("cuda deployment: " + std::to_string(device_gpu.size()) + " GPU assignments for " +
                         std::to_string(topology.num_devices) + " devices");
  std::int32_t first = -1;
  for (std::int32_t d = 0; d < topology.num_devices; ++d) {
    if (topology.process_of(d) != process) continue;
    const int gpu = gpu_of(device_gpu, d);
    const std::string& name = topology.device_names[static_cast<std::size_t>(d)];
    if (gpu < 0 || gpu >= gpu_count)
      return Status::Error("device " + name + " is on gpu " + std::to_string(gpu) + ", which does not exist (this " +
                           "machine has " + std::to_string(gpu_count) + " GPU" + (gpu_count == 1 ? "" : "s") +
                           (gpu_count > 0 ? ", 0 to " + std::to_string(gpu_count - 1) : "") + ")");
    if (first < 0) {
      first = d;
    } else if (across_processes && gpu != gpu_of(device_gpu, first)) {
      return Status::Error("device " + name + " is on gpu " + std::to_string(gpu) + " and device " +
                           topology.device_names[static_cast<std::size_t>(first)] + " on gpu " +
                           std::to_string(gpu_of(device_gpu, first)) + ", both on rank " + std::to_string(process) +
                           ": under a launcher each rank runs its devices on one GPU (NCCL links one GPU per rank "
                           "to the others'; give the rank's devices one gpu, or run one process)");
    }
  }
  return Status::Ok();
}

DeviceModelNeeds gpu_needs(const ModelConfig& c, const Topology& topology, const std::vector<int>& device_gpu,
                           std::int32_t process, int gpu, std::int32_t kv_pages_per_rank, std::int32_t page_size) {
  DeviceModelNeeds needs;
  std::int32_t attention = 0, workers = 0;
  needs.who = "gpu " + std::to_string(gpu) + " (";
  for (std::int32_t d = 0; d < topology.num_devices; ++d) {
    if (topology.process_of(d) != process || gpu_of(device_gpu, d) != gpu) continue;
    if (topology.device_rank[static_cast<std::size_t>(d)] >= 0) ++attention;
    needs.who += (workers ? ", " : "") + topology.device_names[static_cast<std::size_t>(d)];
    ++workers;
  }
  needs.who += ")";
  needs.attention = attention > 0;
  if (workers > 0)
    needs.experts.assign(static_cast<std::size_t>(c.num_layers),
                         std::vector<bool>(static_cast<std::size_t>(c.num_experts), true));
  needs.other_bytes = attention * (CudaExecutor::kv_bytes(c, kv_pages_per_rank, page_size) +
                                   CudaExecutor::fixed_bytes(c, true, kv_pages_per_rank)) +
                      (workers - attention) * CudaExecutor::fixed_bytes(c, false, 0) + workers * scratch_bytes(c);
  return needs;
}

}  // namespace sy
