#include "engine/cuda/decode_graphs.h"

#include <cstdio>
#include <string>

namespace sy {
namespace {

// DecodeGraphs::process_stats.
DecodeGraphs::Counters all;

Status cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Status::Error(std::string(what) + ": " + cudaGetErrorString(err));
}

}  // namespace

std::int32_t DecodeGraphs::bucket(std::int64_t n) {
  if (n < 1 || n > kMaxBucket) return 0;
  std::int32_t b = 1;
  while (b < n) b *= 2;
  return b;
}

DecodeGraphs::~DecodeGraphs() {
  for (auto& [key, e] : graphs_)
    if (e.exec != nullptr) cudaGraphExecDestroy(e.exec);
}

CudaGraphStats DecodeGraphs::stats() const { return counts_.load(); }

CudaGraphStats DecodeGraphs::process_stats() { return all.load(); }

void DecodeGraphs::count(std::atomic<std::int64_t> Counters::*what) {
  ++(counts_.*what);
  ++(all.*what);
}

Status DecodeGraphs::run(const Key& key, cudaStream_t stream, const std::function<Status()>& body) {
  if (!enabled_) return body();
  Entry& e = graphs_[key];
  switch (e.state) {
    case State::Cold:
      // The first run is eager: CUDA loads modules lazily and cuBLAS picks and caches its
      // kernels on first use, none of which may happen inside a capture (PyTorch and vLLM
      // warm up before capturing for the same reason).
      e.state = State::Warm;
      count(&Counters::warmups);
      return body();
    case State::Warm:
      if (!capture(key, e, stream, body)) return body();
      break;
    case State::Eager:
      return body();
    case State::Captured:
      break;
  }
  SY_RETURN_IF_ERROR(cuda(cudaGraphLaunch(e.exec, stream), "cudaGraphLaunch (decode attention)"));
  count(&Counters::replays);
  return Status::Ok();
}

Status DecodeGraphs::prepare(const Key& key, cudaStream_t stream, const std::function<Status()>& body) {
  if (!enabled_) return Status::Ok();
  Entry& e = graphs_[key];
  if (e.state == State::Cold) {
    SY_RETURN_IF_ERROR(body());
    e.state = State::Warm;
    count(&Counters::warmups);
  }
  if (e.state == State::Warm) capture(key, e, stream, body);
  return Status::Ok();
}

bool DecodeGraphs::capture(const Key& key, Entry& e, cudaStream_t stream, const std::function<Status()>& body) {
  // Thread-local mode: the other workers' threads share the GPU and may allocate or copy
  // synchronously meanwhile; only this thread's unsafe calls would break this capture.
  Status status = cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  if (status.ok()) {
    status = body();
    // Always ends the capture, also after a failed call, so the stream is usable eagerly.
    const Status ended = cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    if (status.ok()) status = ended;
  }
  if (status.ok() && graph == nullptr) status = Status::Error("cudaStreamEndCapture returned no graph");
  if (status.ok()) status = cuda(cudaGraphInstantiate(&e.exec, graph, 0), "cudaGraphInstantiate");
  if (graph != nullptr) cudaGraphDestroy(graph);  // the executable graph is a copy
  if (status.ok()) {
    e.state = State::Captured;
    count(&Counters::captures);
    return true;
  }
  // Capture errors (e.g. cudaErrorStreamCaptureUnsupported) are not sticky: clear the one the
  // failed call left so that the eager run's checks do not report it.
  (void)cudaGetLastError();
  if (e.exec != nullptr) cudaGraphExecDestroy(e.exec);
  e.exec = nullptr;
  e.state = State::Eager;
  count(&Counters::fallbacks);
  if (!warned_) {
    warned_ = true;
    std::fprintf(stderr,
                 "cuda backend: device %d: capturing the CUDA graph of block %d at %d decode rows failed (%s); that "
                 "shape runs eagerly from now on (further failures are counted, not reported)\n",
                 device_, key.block, key.bucket, status.message().c_str());
  }
  return false;
}

}  // namespace sy
