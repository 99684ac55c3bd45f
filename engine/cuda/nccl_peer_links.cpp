#include "engine/cuda/nccl_peer_links.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

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
      // Every transfer was waited for: nothing is pending on the communicator.
      if (link.comm) ncclCommDestroy(link.comm);
      if (link.stream) cudaStreamDestroy(link.stream);
    }
}

std::string NcclPeerLinks::memory() const {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, gpu_) != cudaSuccess) return "";
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
  if (const cudaError_t e = cudaSetDevice(gpu_); e != cudaSuccess)
    return Status::Error(cuda_error(("cudaSetDevice(" + std::to_string(gpu_) + ")").c_str(), e));
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
  float* probe = nullptr;
  if (const cudaError_t e = kernels::locked_malloc(&probe, sizeof(float)); e != cudaSuccess)
    return Status::Error(cuda_error("cudaMalloc (NCCL probe)", e));
  for (const dist::DeviceLinkPair& p : pairs) {
    if (p.from != rank && p.to != rank) continue;
    const bool sending = p.from == rank;
    const Link& link = sending ? to_.at(p.to) : from_.at(p.from);
    float* const data[1] = {probe};
    const std::size_t floats[1] = {1};
    transfer(link, sending, data, floats, "NCCL probe between ranks");
  }
  kernels::locked_free(probe);
  return Status::Ok();
}

void NcclPeerLinks::transfer(const Link& link, bool sending, std::span<float* const> data,
                             std::span<const std::size_t> floats, const char* what) {
  auto nccl = [what](ncclResult_t r, const char* call) {
    if (r == ncclSuccess) return;
    std::fprintf(stderr, "cuda backend: %s: %s: %s\n", what, call, ncclGetErrorString(r));
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
  must(cudaStreamSynchronize(link.stream), what);
}

void NcclPeerLinks::send(std::int32_t peer, std::span<const Activations* const> rows) {
  std::vector<float*> data;
  std::vector<std::size_t> floats;
  for (const Activations* a : rows) {
    // ncclSend only reads its buffer; NCCL's signature takes it as const void*.
    data.push_back(const_cast<float*>(CudaActivationOps::data(*a)));
    floats.push_back(static_cast<std::size_t>(a->rows() * a->width()));
  }
  transfer(to_.at(peer), true, data, floats, "NCCL rows to another rank");
}

void NcclPeerLinks::receive(std::int32_t peer, std::span<Activations* const> rows) {
  std::vector<float*> data;
  std::vector<std::size_t> floats;
  for (Activations* a : rows) {
    data.push_back(CudaActivationOps::data(*a));
    floats.push_back(static_cast<std::size_t>(a->rows() * a->width()));
  }
  transfer(from_.at(peer), false, data, floats, "NCCL rows from another rank");
}

std::unique_ptr<dist::DeviceLinks> cuda_peer_links(int gpu) { return std::make_unique<NcclPeerLinks>(gpu); }

}  // namespace sy
