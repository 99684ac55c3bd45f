// Which GPU runs what on the cuda backend, decided on the host before any CUDA call: the GPUs a
// process uses, how rows travel between two devices, and the weights and memory each GPU needs
// for the devices it runs. Pure functions, tested without a GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/cuda/device_model.h"
#include "engine/model/model_config.h"
#include "engine/runtime/topology.h"

namespace sy {

// device_gpu[d]: the GPU of device d; empty: every device on GPU 0.
int gpu_of(const std::vector<int>& device_gpu, std::int32_t device);

// How a shipment's rows go from device src to device dst.
enum class TransferPath {
  SameGpu,           // one memory: the handles as they are
  BetweenGpus,       // two GPUs of one process: NCCL send/recv into the receiver's GPU
  BetweenProcesses,  // another rank: the process transport (NCCL between different GPUs, else host-staged)
};
TransferPath transfer_path(const Topology& topology, const std::vector<int>& device_gpu, std::int32_t src,
                           std::int32_t dst);

// The GPUs of `process`'s devices, ascending and distinct (the order of its NCCL communicators).
std::vector<int> process_gpus(const Topology& topology, const std::vector<int>& device_gpu, std::int32_t process);

// Whether `process` can run its devices on a machine of `gpu_count` GPUs: every GPU named
// exists, and a process that is one rank of several (across_processes) uses one GPU (NCCL
// between ranks links one GPU per rank). Errors name the device and its GPU.
Status check_gpus(const Topology& topology, const std::vector<int>& device_gpu, std::int32_t process, int gpu_count,
                  bool across_processes);

// What GPU `gpu` holds for the devices of `process` on it: attention weights where it runs an
// attention device, every routed expert where it runs any device (live placement changes then
// copy nothing), and KV caches, executor buffers and scratch of those devices for the fit check.
DeviceModelNeeds gpu_needs(const ModelConfig& config, const Topology& topology, const std::vector<int>& device_gpu,
                           std::int32_t process, int gpu, std::int32_t kv_pages_per_rank, std::int32_t page_size);

}  // namespace sy
