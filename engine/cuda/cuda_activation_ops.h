// The activation operations of a cuda device: float rows in GPU memory from a pool of its own,
// moved by one row-copy kernel per batch operation. Workers that share a GPU pass handles as
// they are (one address space); the copies run on a stream of the operations' own and finish
// before each call returns, so the runtime sees them as done, as on the cpu backend. Between
// processes rows go through host memory (copy_to_host, allocate_from_host).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <vector>

#include "engine/runtime/activation_ops.h"

namespace sy {

class CudaActivationOps final : public ActivationOps {
 public:
  explicit CudaActivationOps(int gpu);
  ~CudaActivationOps() override;
  CudaActivationOps(const CudaActivationOps&) = delete;
  CudaActivationOps& operator=(const CudaActivationOps&) = delete;

  Activations allocate(std::int64_t rows, std::int64_t width) override;
  void gather(std::span<const SourceRow> from, Activations& dst) override;
  void append(Activations& dst, Activations&& src) override;
  void scatter(const Activations& src, std::span<const TargetRow> to) override;
  // On a stream of the ops' own (copy_to_host through pinned staging of theirs,
  // allocate_from_host straight from the caller's memory): a transport's thread may call these
  // while the device's worker gathers and scatters.
  void copy_to_host(const Activations& a, void* out) override;
  Activations allocate_from_host(const void* in, std::int64_t rows, std::int64_t width) override;

  // The device floats of a handle of any CudaActivationOps (rows × width, row-major).
  static float* data(Activations& a);
  static const float* data(const Activations& a);

 protected:
  void release(void* storage, std::int32_t tag) noexcept override;

 private:
  // Copies rows between device rows, pointer pairs uploaded and run in one launch; waits.
  void copy(const std::vector<const float*>& src, const std::vector<float*>& dst, std::int64_t width);

  int gpu_;
  cudaStream_t stream_ = nullptr;
  // Free buffers by size class (2^tag floats); allocate() and release() also come from the
  // device's own thread.
  std::mutex mutex_;
  std::map<std::int32_t, std::vector<void*>> free_;
  std::vector<void*> all_;  // from cudaMallocAsync (allocate() says why)
  void* pointers_ = nullptr;  // device scratch for the row pointer arrays
  std::int64_t pointer_capacity_ = 0;

  // Pinned host memory of at least `bytes`, for copy_to_host; under host_mutex_.
  void* staging(std::size_t bytes);

  // Copies to and from host memory (a transport between processes): their own stream and
  // staging, so they need not wait for, nor be waited on by, the row copies above.
  std::mutex host_mutex_;
  cudaStream_t host_stream_ = nullptr;
  void* staging_ = nullptr;
  std::size_t staging_bytes_ = 0;
};

}  // namespace sy
