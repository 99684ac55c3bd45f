#include "kernels/cuda/device_sync_lock.h"

namespace sy::kernels {

std::mutex& device_sync_mutex() {
  static std::mutex mutex;
  return mutex;
}

cudaError_t locked_malloc(void** p, std::size_t bytes) {
  std::lock_guard lock(device_sync_mutex());
  return cudaMalloc(p, bytes);
}

cudaError_t locked_free(void* p) {
  std::lock_guard lock(device_sync_mutex());
  return cudaFree(p);
}

cudaError_t locked_malloc_host(void** p, std::size_t bytes) {
  std::lock_guard lock(device_sync_mutex());
  return cudaMallocHost(p, bytes);
}

cudaError_t locked_free_host(void* p) {
  std::lock_guard lock(device_sync_mutex());
  return cudaFreeHost(p);
}

}  // namespace sy::kernels
