// One process-wide gate between NCCL transfers and the CUDA calls that wait for a whole device
// (allocation and release of device and pinned memory).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace sy::kernels {

// Why: an NCCL kernel spins on its GPU until its peer's kernel runs. A cudaFree (or cudaMalloc,
// cudaMallocHost, cudaFreeHost) waits for the whole device, so while such a kernel is in flight
// it waits for the peer too, and the driver holds other launches back behind it:
// - one thread driving several GPUs (NcclLinks): ncclGroupEnd launches the kernels one GPU
//   after another; a cudaFree between two launches waits for the first kernel, whose peer is
//   the launch it holds back: the process hangs (NVIDIA/nccl#750, #48; PyTorch's cudaFree
//   mutex, pytorch/pytorch#880 and #22173);
// - ranks in different processes (NcclPeerLinks): rank A's cudaFree waits for A's send, whose
//   receive B launches only once B's own cudaFree, waiting for B's send to A, lets it; a
//   mutex held just around launches does not break that cycle, since each side's cudaFree
//   waits on the other side's launch.
// So a device-wide call runs only while no NCCL transfer of this process is in flight (from
// before its launch until its streams are synchronised), and transfers wait only while such a
// call is running (which then has no NCCL kernel to wait for, so it returns). Transfers may
// overlap one another; a device-wide call waits for a moment with none. No cycle: a transfer
// waits on nothing but a running call, and a running call on nothing NCCL. One rule more: a
// thread that another rank's transfer waits for (a rank's network thread, which posts the
// receives) makes none of these calls, since they wait for this rank's own sends, which may
// wait for that other rank's network thread in turn; arriving rows are allocated stream-ordered
// instead (cudaMallocAsync, which waits for no other work: CudaActivationOps::allocate).
class NcclInFlight {
 public:
  NcclInFlight();  // waits while a device-wide call runs
  ~NcclInFlight();
  NcclInFlight(const NcclInFlight&) = delete;
  NcclInFlight& operator=(const NcclInFlight&) = delete;
};

// cudaMalloc, cudaFree, cudaMallocHost and cudaFreeHost, each once no NCCL transfer of this
// process is in flight, and alone. The free functions accept null, as CUDA's do.
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

// For tests: NCCL transfers in flight now, and whether a device-wide call is running.
int nccl_transfers_in_flight();
bool device_wide_call_running();

}  // namespace sy::kernels
