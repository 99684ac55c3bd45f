// CUDA graphs for the cuda executor's decode attention executions, so that a small batch's
// ~20 launches per block cost one graph launch (issue 13; AMoE §4 captures a graph per layer).
// The executor prepares every shape (block, batch-size bucket, whether the shared expert runs
// inline) at start-up: one eager warm-up, then the capture; serving only replays. A shape that
// was not prepared runs eagerly on its first use and is captured on its second. A capture that fails
// leaves that shape eager for good, with one warning per executor, never a failed run.
// Deviation from AMoE §4, whose L × G layer graphs share only their input buffer: here every
// graph of an executor runs over the same fixed buffers (inputs, intermediates, outputs), as
// one stream replays one graph at a time and the outputs are copied out after each replay.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <tuple>

#include "base/status.h"

namespace sy {

struct CudaGraphStats {
  std::int64_t warmups = 0;    // first executions of a shape, eager (lazy module loads happen outside capture)
  std::int64_t captures = 0;   // graphs captured and instantiated
  std::int64_t replays = 0;    // graph launches (the one right after its capture included)
  std::int64_t fallbacks = 0;  // shapes whose capture failed: eager from then on
};

class DecodeGraphs {
 public:
  // Decode batches are padded to the next of 1, 2, 4, ..., 256 rows (vLLM's scheme): 9 graphs
  // per block at most. Larger batches run eagerly.
  static constexpr std::int32_t kMaxBucket = 256;
  // The smallest bucket that holds n rows; 0 when none does.
  static std::int32_t bucket(std::int64_t n);

  struct Key {
    std::int32_t block = 0;
    std::int32_t bucket = 0;
    bool shared_inline = false;
    bool operator<(const Key& o) const {
      return std::tie(block, bucket, shared_inline) < std::tie(o.block, o.bucket, o.shared_inline);
    }
  };

  // enabled false: run() always runs the body eagerly (--cuda-graphs off). device: the
  // worker's index, for the warning.
  DecodeGraphs(bool enabled, std::int32_t device) : enabled_(enabled), device_(device) {}
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // Queues the execution of `key` on `stream`: body() itself (it enqueues the work and
  // returns the first failure), or the graph captured from it (by prepare(), or here on the
  // shape's second run when it was not prepared). Everything body() reads or
  // writes must be at addresses that never change for this key, and its kernels must take
  // their sizes from the key's padded shape or from device memory: a replay repeats the
  // captured launches exactly. Only the executor's thread calls this.
  Status run(const Key& key, cudaStream_t stream, const std::function<Status()>& body);

  // Warms `key` up (body() once, eagerly) and captures it now, so that run() only replays it.
  // The executor prepares every shape at start-up, before its workers run: a synchronising
  // call (cudaEventSynchronize, cudaStreamSynchronize, cudaFree...) made by another thread on
  // the same GPU during a capture invalidates that capture whatever its mode (measured on
  // NVIDIA hardware, ROCm/rocm-systems#4508), and the workers sharing a GPU make such calls
  // after every execution. A failed capture leaves the shape eager (a fallback, one warning);
  // the returned status is the warm-up's, whose failure is a real one.
  Status prepare(const Key& key, cudaStream_t stream, const std::function<Status()>& body);

  bool enabled() const { return enabled_; }
  // Safe from any thread (tests read it after a run).
  CudaGraphStats stats() const;
  // The sums over every DecodeGraphs of this process, so that whole-model tests, which cannot
  // reach the executors inside a deployment, can tell whether serving ran any graph at all.
  static CudaGraphStats process_stats();

 private:
  enum class State { Cold, Warm, Captured, Eager };
  struct Entry {
    State state = State::Cold;
    cudaGraphExec_t exec = nullptr;
  };
  // Captures body into e.exec; on failure reports once and marks e eager.
  bool capture(const Key& key, Entry& e, cudaStream_t stream, const std::function<Status()>& body);

  bool enabled_;
  std::int32_t device_;
  bool warned_ = false;
  std::map<Key, Entry> graphs_;

 public:
  // CudaGraphStats as counters other threads may read (tests read them after a run).
  struct Counters {
    std::atomic<std::int64_t> warmups{0}, captures{0}, replays{0}, fallbacks{0};
    CudaGraphStats load() const { return {warmups.load(), captures.load(), replays.load(), fallbacks.load()}; }
  };

 private:
  // One more of `what`, in this object's counts and the process's.
  void count(std::atomic<std::int64_t> Counters::*what);
  Counters counts_;
};

}  // namespace sy
