#include "kernels/cuda/device_sync_lock.h"

#include <condition_variable>
#include <mutex>

namespace sy::kernels {
namespace {

struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  int transfers = 0;     // NCCL transfers in flight
  bool calling = false;  // a device-wide call runs
};

Gate& gate() {
  static Gate g;
  return g;
}

template <typename Call>
cudaError_t alone(Call call) {
  Gate& g = gate();
  {
    std::unique_lock lock(g.mutex);
    g.changed.wait(lock, [&] { return g.transfers == 0 && !g.calling; });
    g.calling = true;
  }
  const cudaError_t e = call();
  {
    std::lock_guard lock(g.mutex);
    g.calling = false;
  }
  g.changed.notify_all();
  return e;
}

}  // namespace

NcclInFlight::NcclInFlight() {
  Gate& g = gate();
  std::unique_lock lock(g.mutex);
  g.changed.wait(lock, [&] { return !g.calling; });
  ++g.transfers;
}

NcclInFlight::~NcclInFlight() {
  Gate& g = gate();
  {
    std::lock_guard lock(g.mutex);
    --g.transfers;
  }
  g.changed.notify_all();
}

cudaError_t locked_malloc(void** p, std::size_t bytes) {
  return alone([&] { return cudaMalloc(p, bytes); });
}
cudaError_t locked_free(void* p) {
  return alone([&] { return cudaFree(p); });
}
cudaError_t locked_malloc_host(void** p, std::size_t bytes) {
  return alone([&] { return cudaMallocHost(p, bytes); });
}
cudaError_t locked_free_host(void* p) {
  return alone([&] { return cudaFreeHost(p); });
}

int nccl_transfers_in_flight() {
  std::lock_guard lock(gate().mutex);
  return gate().transfers;
}

bool device_wide_call_running() {
  std::lock_guard lock(gate().mutex);
  return gate().calling;
}

}  // namespace sy::kernels
