#include "engine/cuda/nccl_peer_links.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "engine/cuda/cuda_activation_ops.h"
#include "engine/cuda/cuda_deployment.h"
#include "engine/cuda/cuda_must.h"
#include "engine/dist/device_link_plan.h"
#include "kernels/cuda/device_sync_lock.h"

namespace sy {
namespace {

using cuda_backend::must;

std::string cuda_error(const char* what, cudaError_t e) { return std::string(what) + ": " + cudaGetErrorString(e); }
std::string nccl_error(const char* what, ncclResult_t r) { return std::string(what) + ": " + ncclGetErrorString(r); }

}  // namespace

NcclPeerLinks::~NcclPeerLinks() {
  cudaSetDevice(gpu_);
  for (auto* links : {&to_, &from_})
    for (auto& [peer, link] : *links) {
      // Every transfer was waited for, so nothing is pending; still ncclCommAbort, not
      // ncclCommDestroy: the latter finalizes first, which waits until the communicator is
      // globally quiescent, i.e. for the peer to tear down too, and each rank goes through its
      // links in its own order (or the peer is dead, after a failed run).
      if (link.comm) ncclCommAbort(link.comm);
      if (link.stream) cudaStreamDestroy(link.stream);
    }
}

std::string NcclPeerLinks::memory() const {
  cudaDeviceProp prop{};
  if (gpu_ < 0 || cudaGetDeviceProperties(&prop, gpu_) != cudaSuccess) return "";
  std::string out = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(prop.uuid.bytes[i]));
    out += hex;
  }
  return out;
}

StatusOr<std::string> NcclPeerLinks::setup(const std::vector<std::string>& memories) {
  std::string out;
  for (std::size_t i = 0; i < dist::device_link_pairs(memories).size(); ++i) {
    ncclUniqueId id;
    if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) return Status::Error(nccl_error("ncclGetUniqueId", r));
    out.append(id.internal, sizeof id.internal);
  }
  return out;
}

Status NcclPeerLinks::connect(std::int32_t rank, const std::vector<std::string>& memories, const std::string& setup) {
  const std::vector<dist::DeviceLinkPair> pairs = dist::device_link_pairs(memories);
  if (setup.size() != pairs.size() * NCCL_UNIQUE_ID_BYTES)
    return Status::Error("rank 0 sent " + std::to_string(setup.size()) + " bytes of NCCL unique ids for " +
                         std::to_string(pairs.size()) + " links between GPUs (run the same build on every rank)");
  bool any = false;
  for (const dist::DeviceLinkPair& p : pairs) any = any || p.from == rank || p.to == rank;
  // Before any CUDA call: a rank without devices (gpu -1) is in no pair and needs no GPU.
  if (!any) return Status::Ok();
  if (const cudaError_t e = cudaSetDevice(gpu_); e != cudaSuccess)
    return Status::Error(cuda_error(("cudaSetDevice(" + std::to_string(gpu_) + ")").c_str(), e));
  // The probes' float, allocated before any join: once a pair has joined, its peer may be in a
  // probe transfer, which an allocation here (in a process running both ends, as the tests do)
  // would wait for (kernels/cuda/device_sync_lock.h).
  float* probe = nullptr;
  if (const cudaError_t e = kernels::locked_malloc(&probe, sizeof(float)); e != cudaSuccess)
    return Status::Error(cuda_error("cudaMalloc (NCCL probe)", e));
  struct Free {
    float* p;
    ~Free() { kernels::locked_free(p); }
  } free_probe{probe};
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const dist::DeviceLinkPair& p = pairs[i];
    if (p.from != rank && p.to != rank) continue;
    const bool sending = p.from == rank;
    const std::int32_t peer = sending ? p.to : p.from;
    Link& link = (sending ? to_ : from_)[peer];
    const std::string which = "NCCL link from rank " + std::to_string(p.from) + " (" +
                              memories[static_cast<std::size_t>(p.from)] + ") to rank " + std::to_string(p.to) + " (" +
                              memories[static_cast<std::size_t>(p.to)] + ")";
    if (const cudaError_t e = cudaStreamCreateWithFlags(&link.stream, cudaStreamNonBlocking); e != cudaSuccess)
      return Status::Error(cuda_error((which + ": cudaStreamCreate").c_str(), e));
    ncclUniqueId id;
    std::memcpy(id.internal, setup.data() + i * sizeof id.internal, sizeof id.internal);
    // Blocks until the other end has joined too; every rank goes through the pairs in one
    // order (device_link_pairs), so the earliest pending pair always has both ends here.
    if (const ncclResult_t r = ncclCommInitRank(&link.comm, 2, id, sending ? 0 : 1); r != ncclSuccess)
      return Status::Error(nccl_error((which + ": ncclCommInitRank").c_str(), r));
  }
  // One float each way, pair by pair in the same order: NCCL connects a pair's peers on its
  // first transfer, allocating device memory, which is safe here (nothing else runs yet) and
  // could hang amid serving (kernels/cuda/device_sync_lock.h).
  for (const dist::DeviceLinkPair& p : pairs) {
    if (p.from != rank && p.to != rank) continue;
    const bool sending = p.from == rank;
    const Link& link = sending ? to_.at(p.to) : from_.at(p.from);
    float* const data[1] = {probe};
    const std::size_t floats[1] = {1};
    transfer(link, sending, data, floats,
             "NCCL probe " + std::string(sending ? "to rank " : "from rank ") + std::to_string(sending ? p.to : p.from));
  }
  return Status::Ok();
}

void NcclPeerLinks::transfer(const Link& link, bool sending, std::span<float* const> data,
                             std::span<const std::size_t> floats, const std::string& what) {
  auto nccl = [&what](ncclResult_t r, const char* call) {
    if (r == ncclSuccess) return;
    std::fprintf(stderr, "cuda backend: %s: %s: %s\n", what.c_str(), call, ncclGetErrorString(r));
    std::abort();
  };
  must(cudaSetDevice(gpu_), "cudaSetDevice");
  // No device-wide call of this process runs until the transfer has finished: one waiting
  // for this GPU would wait for the peer's launch, which may wait for one of theirs waiting
  // for ours (kernels/cuda/device_sync_lock.h). Nothing here allocates.
  const kernels::NcclInFlight in_flight;
  // Several transfers to one peer in one group run in the order issued (NCCL's p2p semantics),
  // and the peer issues its matching calls in the same order.
  nccl(ncclGroupStart(), "ncclGroupStart");
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (sending)
      nccl(ncclSend(data[i], floats[i], ncclFloat32, 1, link.comm, link.stream), "ncclSend");
    else
      nccl(ncclRecv(data[i], floats[i], ncclFloat32, 0, link.comm, link.stream), "ncclRecv");
  }
  nccl(ncclGroupEnd(), "ncclGroupEnd");
  // Waited for by polling, not cudaStreamSynchronize: a dead peer never completes its half, and
  // NCCL reports what it notices only through ncclCommGetAsyncError (then the communicator
  // must be aborted). A transfer normally takes microseconds to milliseconds; give_up_s_ is
  // the bootstrap timeout, far beyond any backlog a live peer could have.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(give_up_s_);
  for (std::uint64_t polls = 0;; ++polls) {
    const cudaError_t e = cudaStreamQuery(link.stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) must(e, what.c_str());
    ncclResult_t async = ncclSuccess;
    nccl(ncclCommGetAsyncError(link.comm, &async), "ncclCommGetAsyncError");
    const bool late = std::chrono::steady_clock::now() > deadline;
    if (async != ncclSuccess || late) {
      std::fprintf(stderr, "cuda backend: %s: %s; aborting its communicator and this rank\n", what.c_str(),
                   async != ncclSuccess ? ncclGetErrorString(async)
                                        : "not finished within the bootstrap timeout (did the other rank die?)");
      ncclCommAbort(link.comm);
      std::abort();
    }
    if (polls > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void NcclPeerLinks::send(std::int32_t peer, std::span<const Activations* const> rows) {
  std::vector<float*> data;
  std::vector<std::size_t> floats;
  for (const Activations* a : rows) {
    // ncclSend only reads its buffer; NCCL's signature takes it as const void*.
    data.push_back(const_cast<float*>(CudaActivationOps::data(*a)));
    floats.push_back(static_cast<std::size_t>(a->rows() * a->width()));
  }
  transfer(to_.at(peer), true, data, floats, "NCCL rows to rank " + std::to_string(peer));
}

void NcclPeerLinks::receive(std::int32_t peer, std::span<Activations* const> rows) {
  std::vector<float*> data;
  std::vector<std::size_t> floats;
  for (Activations* a : rows) {
    data.push_back(CudaActivationOps::data(*a));
    floats.push_back(static_cast<std::size_t>(a->rows() * a->width()));
  }
  transfer(from_.at(peer), false, data, floats, "NCCL rows from rank " + std::to_string(peer));
}

std::unique_ptr<dist::DeviceLinks> cuda_peer_links(int gpu, double give_up_s) {
  return std::make_unique<NcclPeerLinks>(gpu, give_up_s);
}

}  // namespace sy
