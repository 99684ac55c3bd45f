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

// Polls `stream` until its work is done or `limit_ns` passed; true when done (or failed:
// an error also means nothing of ours runs there any longer).
bool stream_drained_after_abort(cudaStream_t stream, std::int64_t limit_ns) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (cudaStreamQuery(stream) != cudaErrorNotReady) return true;
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    if (waited.count() >= limit_ns) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

using cuda_backend::must;

std::string cuda_error(const char* what, cudaError_t e) { return std::string(what) + ": " + cudaGetErrorString(e); }
std::string nccl_error(const char* what, ncclResult_t r) { return std::string(what) + ": " + ncclGetErrorString(r); }
std::int64_t seconds_ns(double s) { return static_cast<std::int64_t>(s * 1e9); }
std::int64_t since_ns(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

NcclPeerLinks::~NcclPeerLinks() {
  cudaSetDevice(gpu_);
  for (auto* links : {&to_, &from_})
    for (auto& [peer, link] : *links) {
      // Every transfer was waited for (or its communicator aborted: null), so nothing is
      // pending; still ncclCommAbort, not
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
  world_ = static_cast<std::int32_t>(memories.size());
  peer_states_ = std::make_unique<std::atomic<std::uint8_t>[]>(memories.size());
  for (std::int32_t r = 0; r < world_; ++r) peer_states_[static_cast<std::size_t>(r)].store(0);
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
    // Non-blocking (config.blocking = 0: the call returns ncclInProgress and the join goes on
    // in NCCL's threads, ncclCommGetAsyncError saying when it is done), so that a rank that
    // died after the bootstrap cannot hold this one forever: the bootstrap timeout bounds the
    // wait, then the communicator is aborted and the error names the rank that did not join.
    // Every rank goes through the pairs in one order (device_link_pairs), so the earliest
    // pending pair always has both ends here.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(&link.comm, 2, id, sending ? 0 : 1, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
      if (link.comm) ncclCommAbort(link.comm);
      link.comm = nullptr;
      return Status::Error(nccl_error((which + ": ncclCommInitRankConfig").c_str(), r));
    }
    // No heartbeats run yet: only the deadline; an NCCL error fails at once (no grace).
    dist::LinkWait wait(which + ": waiting for rank " + std::to_string(peer) + " to join", seconds_ns(give_up_s_), 0,
                        /*watched=*/false);
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      ncclResult_t state = ncclInProgress;
      if (const ncclResult_t q = ncclCommGetAsyncError(link.comm, &state); q != ncclSuccess) state = q;
      const std::string error = state == ncclSuccess || state == ncclInProgress ? "" : ncclGetErrorString(state);
      const dist::LinkWait::Step step =
          wait.observe(since_ns(start), state == ncclSuccess, error, dist::PeerState::Alive);
      if (step.abort && link.comm) {
        ncclCommAbort(link.comm);
        link.comm = nullptr;
      }
      if (step.next == dist::LinkWait::Next::Done) break;
      if (step.next != dist::LinkWait::Next::Poll) return Status::Error(wait.why());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // One float each way, pair by pair in the same order: NCCL connects a pair's peers on its
  // first transfer, allocating device memory, which is safe here (nothing else runs yet) and
  // could hang amid serving (kernels/cuda/device_sync_lock.h).
  for (const dist::DeviceLinkPair& p : pairs) {
    if (p.from != rank && p.to != rank) continue;
    const bool sending = p.from == rank;
    const std::int32_t peer = sending ? p.to : p.from;
    Link& link = sending ? to_.at(peer) : from_.at(peer);
    float* const data[1] = {probe};
    const std::size_t floats[1] = {1};
    std::string why;
    if (transfer(link, peer, sending, data, floats,
                 "NCCL probe " + std::string(sending ? "to rank " : "from rank ") + std::to_string(peer), nullptr,
                 why) != Outcome::Done)
      return Status::Error(why);
  }
  return Status::Ok();
}

void NcclPeerLinks::peer_fault(std::int32_t peer, dist::PeerState state, const std::string& why) {
  if (!peer_states_ || peer < 0 || peer >= world_ || state == dist::PeerState::Alive) return;
  {
    std::lock_guard lock(reasons_mutex_);
    reasons_[peer] = why;
  }
  std::atomic<std::uint8_t>& s = peer_states_[static_cast<std::size_t>(peer)];
  // A dead peer overrides a refusal (its requests then fail by the lost-rank path); a refusal
  // does not override death.
  if (state == dist::PeerState::Lost) {
    s.store(static_cast<std::uint8_t>(state));
  } else {
    std::uint8_t alive = static_cast<std::uint8_t>(dist::PeerState::Alive);
    s.compare_exchange_strong(alive, static_cast<std::uint8_t>(state));
  }
}

dist::PeerState NcclPeerLinks::peer_state(std::int32_t peer, std::string& why) const {
  if (!peer_states_ || peer < 0 || peer >= world_) return dist::PeerState::Alive;
  const auto state = static_cast<dist::PeerState>(peer_states_[static_cast<std::size_t>(peer)].load());
  if (state != dist::PeerState::Alive) {
    std::lock_guard lock(reasons_mutex_);
    const auto it = reasons_.find(peer);
    why = it == reasons_.end() ? "" : it->second;
  }
  return state;
}

NcclPeerLinks::Outcome NcclPeerLinks::transfer(Link& link, std::int32_t peer, bool sending,
                                               std::span<float* const> data, std::span<const std::size_t> floats,
                                               const std::string& what, const std::function<void()>* waiting,
                                               std::string& why) {
  // Given up after its peer was found dead: the rows go nowhere (the run is ending).
  if (link.given_up) return Outcome::PeerLost;
  must(cudaSetDevice(gpu_), "cudaSetDevice");
  // No device-wide call of this process runs until the transfer has finished: one waiting
  // for this GPU would wait for the peer's launch, which may wait for one of theirs waiting
  // for ours (kernels/cuda/device_sync_lock.h). Nothing here allocates.
  const kernels::NcclInFlight in_flight;
  dist::LinkWait wait(what, seconds_ns(give_up_s_), seconds_ns(2 * heartbeat_s_));
  const auto start = std::chrono::steady_clock::now();
  std::string error;  // NCCL's or CUDA's, once one was reported
  bool issued = false;  // the group was issued (not when the peer was already known faulty)
  bool enqueued = false;
  std::string peer_why;
  // A peer already known dead or refusing: no NCCL call at all (nothing would match it).
  if (peer_state(peer, peer_why) == dist::PeerState::Alive) {
    // Several transfers to one peer in one group run in the order issued (NCCL's p2p
    // semantics), and the peer issues its matching calls in the same order. On a non-blocking
    // communicator every call may answer ncclInProgress: the group is then enqueued on the
    // stream once ncclCommGetAsyncError says ncclSuccess.
    auto call = [&error](ncclResult_t r, const char* name) {
      if (r != ncclSuccess && r != ncclInProgress && error.empty()) error = nccl_error(name, r);
      return r;
    };
    call(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (sending)
        call(ncclSend(data[i], floats[i], ncclFloat32, 1, link.comm, link.stream), "ncclSend");
      else
        call(ncclRecv(data[i], floats[i], ncclFloat32, 0, link.comm, link.stream), "ncclRecv");
    }
    enqueued = call(ncclGroupEnd(), "ncclGroupEnd") == ncclSuccess && error.empty();
    issued = true;
  }
  // Polled, not cudaStreamSynchronize: a dead peer never completes its half. Each poll asks
  // NCCL (its async error), the stream, and the heartbeats (peer_fault); LinkWait decides.
  // A transfer normally takes microseconds to milliseconds.
  auto next_pump = start;
  for (std::uint64_t polls = 0;; ++polls) {
    bool done = false;
    // Not issued: an idle stream would read as done; only the peer's state can end the wait.
    if (issued && link.comm && error.empty()) {
      ncclResult_t state = ncclInProgress;
      if (const ncclResult_t q = ncclCommGetAsyncError(link.comm, &state); q != ncclSuccess) state = q;
      if (state == ncclSuccess)
        enqueued = true;
      else if (state != ncclInProgress)
        error = nccl_error("ncclCommGetAsyncError", state);
      if (enqueued && error.empty()) {
        const cudaError_t e = cudaStreamQuery(link.stream);
        if (e == cudaSuccess)
          done = true;
        else if (e != cudaErrorNotReady)
          error = cuda_error("cudaStreamQuery", e);
      }
    }
    const dist::PeerState peer_now = peer_state(peer, peer_why);
    const auto now = std::chrono::steady_clock::now();
    const dist::LinkWait::Step step = wait.observe(since_ns(start), done, error, peer_now, peer_why);
    if (step.abort && link.comm) {
      // From this thread, which owns the link: nothing else uses the communicator now.
      ncclCommAbort(link.comm);
      link.comm = nullptr;
      // NCCL does not promise that an aborted kernel has left the stream when the abort
      // returns, and the rows go back to the pool once this returns: a late write would land
      // in reused memory. Wait (bounded) for the stream; a kernel still there after the
      // give-up time leaves this rank nothing safe to do but end.
      if (issued && !stream_drained_after_abort(link.stream, seconds_ns(give_up_s_))) {
        why = what + ": the aborted NCCL kernel was still on the stream after " + std::to_string(give_up_s_) +
              " s, so its rows cannot be reused";
        return Outcome::Failed;
      }
    }
    switch (step.next) {
      case dist::LinkWait::Next::Done:
        return Outcome::Done;
      case dist::LinkWait::Next::PeerLost:
        link.given_up = true;
        std::fprintf(stderr, "cuda backend: %s; its link is aborted and its rows dropped\n", wait.why().c_str());
        why = wait.why();
        return Outcome::PeerLost;
      case dist::LinkWait::Next::Fail:
        why = wait.why();
        return Outcome::Failed;
      case dist::LinkWait::Next::Poll:
        break;
    }
    // The network thread keeps its heartbeats going and learns of a dead peer meanwhile.
    if (waiting && now >= next_pump) {
      (*waiting)();
      next_pump = now + std::chrono::milliseconds(1);
    }
    if (polls > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

bool NcclPeerLinks::settle(Outcome outcome, const std::string& why) {
  if (outcome == Outcome::Failed) {
    // The link is out of step (or dead) while its peer lives: this rank cannot go on; its
    // peers find it dead within the heartbeat timeout and take the lost-rank path.
    std::fprintf(stderr, "cuda backend: %s; ending this rank\n", why.c_str());
    std::abort();
  }
  return outcome == Outcome::Done;
}

bool NcclPeerLinks::send(std::int32_t peer, std::span<const Activations* const> rows) {
  std::vector<float*> data;
  std::vector<std::size_t> floats;
  for (const Activations* a : rows) {
    // ncclSend only reads its buffer; NCCL's signature takes it as const void*.
    data.push_back(const_cast<float*>(CudaActivationOps::data(*a)));
    floats.push_back(static_cast<std::size_t>(a->rows() * a->width()));
  }
  std::string why;
  const Outcome o =
      transfer(to_.at(peer), peer, true, data, floats, "NCCL rows to rank " + std::to_string(peer), nullptr, why);
  return settle(o, why);
}

bool NcclPeerLinks::receive(std::int32_t peer, std::span<Activations* const> rows,
                            const std::function<void()>& waiting) {
  std::vector<float*> data;
  std::vector<std::size_t> floats;
  for (Activations* a : rows) {
    data.push_back(CudaActivationOps::data(*a));
    floats.push_back(static_cast<std::size_t>(a->rows() * a->width()));
  }
  std::string why;
  const Outcome o = transfer(from_.at(peer), peer, false, data, floats, "NCCL rows from rank " + std::to_string(peer),
                             waiting ? &waiting : nullptr, why);
  return settle(o, why);
}

std::unique_ptr<dist::DeviceLinks> cuda_peer_links(int gpu, double give_up_s, double heartbeat_s) {
  return std::make_unique<NcclPeerLinks>(gpu, give_up_s, heartbeat_s);
}

}  // namespace sy
