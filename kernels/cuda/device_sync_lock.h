// One process-wide lock between NCCL launching a group's kernels on several GPUs and the CUDA
// calls that wait for a whole device (allocation and release of device and pinned memory).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>

namespace sy::kernels {

// Why: when one thread drives several GPUs, ncclGroupEnd launches the group's kernels one GPU
// after another, and each kernel spins until its peers run. A cudaFree (or cudaMalloc,
// cudaMallocHost, cudaFreeHost) on another thread between two of those launches waits for the
// first GPU to go idle, which it never does, while the driver holds the second launch back
// behind that call: the process hangs (NVIDIA/nccl#750, #48; PyTorch guards its cudaFree with
// the same kind of mutex, pytorch/pytorch#880 and #22173). The NCCL side holds this lock from
// ncclGroupStart to ncclGroupEnd; every allocating and freeing call of the cuda backend goes
// through the functions below, which hold it for the call. Neither side holds it while waiting
// for work to finish, so it is never held for long, and no call made under it takes it again.
std::mutex& device_sync_mutex();

// cudaMalloc, cudaFree, cudaMallocHost and cudaFreeHost under device_sync_mutex(). The free
// functions accept null, as CUDA's do.
cudaError_t locked_malloc(void** p, std::size_t bytes);
cudaError_t locked_free(void* p);
cudaError_t locked_malloc_host(void** p, std::size_t bytes);
cudaError_t locked_free_host(void* p);

template <typename T>
cudaError_t locked_malloc(T** p, std::size_t bytes) {
  return locked_malloc(reinterpret_cast<void**>(p), bytes);
}
template <typename T>
cudaError_t locked_malloc_host(T** p, std::size_t bytes) {
  return locked_malloc_host(reinterpret_cast<void**>(p), bytes);
}

}  // namespace sy::kernels
