// One device's spare host buffers, kept by power-of-two size class: a buffer given back is
// handed out again for the next request of its class, so that steady serving, which keeps
// asking for the same few sizes, allocates nothing after its first iterations.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <vector>

namespace sy {

class HostBufferPool {
 public:
  struct Buffer {
    float* data = nullptr;
    std::int32_t size_class = 0;  // holds capacity(size_class) floats
  };

  HostBufferPool() = default;
  HostBufferPool(const HostBufferPool&) = delete;
  HostBufferPool& operator=(const HostBufferPool&) = delete;
  // Every buffer must have been given back by now.
  ~HostBufferPool();

  // A buffer of at least `floats` floats, 64-byte aligned (for the kernels' vector loads).
  // Thread-safe: on the wall clock the device's thread and the event loop's both take and give.
  Buffer take(std::int64_t floats);
  void give(Buffer buffer) noexcept;

  static std::int64_t capacity(std::int32_t size_class) { return std::int64_t{1} << size_class; }
  // Buffers this pool has obtained from the heap so far; serving from spares adds none.
  std::int64_t heap_allocations() const;
  // Buffers given back and waiting to be taken again.
  std::int64_t spare() const;

 private:
  // The smallest class is a few cache lines: smaller rows would waste little anyway.
  static constexpr std::int32_t kMinClass = 6;
  static constexpr std::int32_t kClasses = 48;

  mutable std::mutex mutex_;
  std::array<std::vector<float*>, kClasses> spare_;
  std::int64_t heap_allocations_ = 0;
};

}  // namespace sy
