#include "engine/cuda/nccl_links.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/cuda/cuda_must.h"
#include "kernels/cuda/device_sync_lock.h"

namespace sy {
namespace {

using cuda_backend::must;

void must_nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  std::fprintf(stderr, "cuda backend: %s: %s\n", what, ncclGetErrorString(r));
  std::abort();
}

}  // namespace

StatusOr<std::unique_ptr<NcclLinks>> NcclLinks::create(std::vector<int> gpus) {
  assert(gpus.size() >= 2 && std::is_sorted(gpus.begin(), gpus.end()) &&
         std::adjacent_find(gpus.begin(), gpus.end()) == gpus.end());
  std::unique_ptr<NcclLinks> links(new NcclLinks(std::move(gpus)));
  const auto n = links->gpus_.size();
  std::string list;
  for (int g : links->gpus_) list += (list.empty() ? "" : ", ") + std::to_string(g);
  // Streams first: the destructor frees whatever was made before a failure.
  for (int g : links->gpus_) {
    cudaStream_t s = nullptr;
    if (const cudaError_t e = cudaSetDevice(g); e != cudaSuccess)
      return Status::Error("cudaSetDevice(" + std::to_string(g) + "): " + cudaGetErrorString(e));
    if (const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); e != cudaSuccess)
      return Status::Error("cudaStreamCreate on gpu " + std::to_string(g) + ": " + cudaGetErrorString(e));
    links->streams_.push_back(s);
  }
  // Activation rows come from each GPU's default memory pool (cudaMallocAsync,
  // CudaActivationOps::allocate), which cudaDeviceEnablePeerAccess does not open to other GPUs;
  // NCCL, between GPUs of one process, may read and write the users' buffers directly (its
  // P2P direct mode): open each pool to every GPU of the clique that can reach it.
  for (int g : links->gpus_)
    for (int h : links->gpus_) {
      int can = 0;
      if (g == h || cudaDeviceCanAccessPeer(&can, h, g) != cudaSuccess || !can) continue;
      cudaMemPool_t pool = nullptr;
      cudaMemAccessDesc access{};
      access.location.type = cudaMemLocationTypeDevice;
      access.location.id = h;
      access.flags = cudaMemAccessFlagsProtReadWrite;
      if (const cudaError_t e = cudaDeviceGetDefaultMemPool(&pool, g); e != cudaSuccess)
        return Status::Error("cudaDeviceGetDefaultMemPool(" + std::to_string(g) + "): " + cudaGetErrorString(e));
      if (const cudaError_t e = cudaMemPoolSetAccess(pool, &access, 1); e != cudaSuccess)
        return Status::Error("cudaMemPoolSetAccess (gpu " + std::to_string(h) + " into gpu " + std::to_string(g) +
                             "'s pool): " + cudaGetErrorString(e));
    }
  std::vector<ncclComm_t> comms(n, nullptr);
  // comms[i] is rank i of the clique, on device gpus[i].
  if (const ncclResult_t r = ncclCommInitAll(comms.data(), static_cast<int>(n), links->gpus_.data()); r != ncclSuccess)
    return Status::Error("NCCL between gpus " + list + ": ncclCommInitAll: " + ncclGetErrorString(r));
  links->comms_ = std::move(comms);
  return links;
}

NcclLinks::~NcclLinks() {
  for (std::size_t i = 0; i < streams_.size(); ++i) {
    cudaSetDevice(gpus_[i]);
    cudaStreamSynchronize(streams_[i]);
  }
  for (ncclComm_t c : comms_)
    if (c) ncclCommDestroy(c);
  for (std::size_t i = 0; i < streams_.size(); ++i) {
    cudaSetDevice(gpus_[i]);
    cudaStreamDestroy(streams_[i]);
  }
}

std::size_t NcclLinks::index(int gpu) const {
  const auto it = std::lower_bound(gpus_.begin(), gpus_.end(), gpu);
  assert(it != gpus_.end() && *it == gpu && "a GPU outside the communicators");
  return static_cast<std::size_t>(it - gpus_.begin());
}

void NcclLinks::move(std::span<const Move> moves) {
  if (moves.empty()) return;
  // ncclGroupEnd launches one kernel per GPU, one after another, and each spins until its
  // peers run: no device-wide call (cudaFree, cudaMalloc...) of an executor thread may run
  // until they have all finished (kernels/cuda/device_sync_lock.h).
  const kernels::NcclInFlight in_flight;
  must_nccl(ncclGroupStart(), "ncclGroupStart");
  for (const Move& m : moves) {
    if (m.floats == 0) continue;
    const std::size_t from = index(m.from_gpu), to = index(m.to_gpu);
    assert(from != to && "a move within one GPU");
    // Peers are ranks of the clique; a sender and its receiver match in the order issued.
    must_nccl(ncclSend(m.from, m.floats, ncclFloat32, static_cast<int>(to), comms_[from], streams_[from]), "ncclSend");
    must_nccl(ncclRecv(m.to, m.floats, ncclFloat32, static_cast<int>(from), comms_[to], streams_[to]), "ncclRecv");
  }
  // Within a group the calls may return before they are enqueued: wait only after the end.
  must_nccl(ncclGroupEnd(), "ncclGroupEnd");
  // Streams without a move return at once.
  for (cudaStream_t s : streams_) must(cudaStreamSynchronize(s), "NCCL rows between GPUs");
}

}  // namespace sy
