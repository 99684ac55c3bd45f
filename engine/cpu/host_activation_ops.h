// The activation operations of a cpu device: its activations are float rows in host memory
// from a pool of its own, moved with memcpy. All cpu devices share host memory, so a handle
// travels between them as it is.
#pragma once

#include <cstdint>
#include <span>

#include "engine/cpu/host_buffer_pool.h"
#include "engine/runtime/activation_ops.h"

namespace sy {

class HostActivationOps final : public ActivationOps {
 public:
  Activations allocate(std::int64_t rows, std::int64_t width) override;
  void gather(std::span<const SourceRow> from, Activations& dst) override;
  void append(Activations& dst, Activations&& src) override;
  void scatter(const Activations& src, std::span<const TargetRow> to) override;
  void copy_to_host(const Activations& a, void* out) override;
  Activations allocate_from_host(const void* in, std::int64_t rows, std::int64_t width) override;

  // The floats of a host handle (rows × width, row-major), for the cpu kernels. Any
  // HostActivationOps may own it: cpu devices pass handles to each other.
  static float* data(Activations& a);
  static const float* data(const Activations& a);

  const HostBufferPool& pool() const { return pool_; }

 protected:
  void release(void* storage, std::int32_t tag) noexcept override;

 private:
  // Room for `rows` rows of dst's width without a new buffer.
  static bool fits(const Activations& dst, std::int64_t rows);

  HostBufferPool pool_;
};

}  // namespace sy
