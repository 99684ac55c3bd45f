#include "engine/cpu/host_buffer_pool.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <new>

namespace sy {
namespace {

constexpr std::align_val_t kAlignment{64};

}  // namespace

HostBufferPool::~HostBufferPool() {
  for (std::int32_t c = 0; c < kClasses; ++c)
    for (float* p : spare_[static_cast<std::size_t>(c)]) ::operator delete(p, kAlignment);
}

HostBufferPool::Buffer HostBufferPool::take(std::int64_t floats) {
  const auto need = static_cast<std::uint64_t>(floats < 1 ? 1 : floats);
  const std::int32_t size_class = std::max(kMinClass, static_cast<std::int32_t>(std::bit_width(need - 1)));
  assert(size_class < kClasses && "an activation buffer beyond any device's memory");
  {
    std::lock_guard lock(mutex_);
    auto& spare = spare_[static_cast<std::size_t>(size_class)];
    if (!spare.empty()) {
      float* p = spare.back();
      spare.pop_back();
      return {p, size_class};
    }
    ++heap_allocations_;
  }
  // Outside the lock: the other thread need not wait for the heap.
  auto* p = static_cast<float*>(
      ::operator new(static_cast<std::size_t>(capacity(size_class)) * sizeof(float), kAlignment));
  return {p, size_class};
}

void HostBufferPool::give(Buffer buffer) noexcept {
  std::lock_guard lock(mutex_);
  spare_[static_cast<std::size_t>(buffer.size_class)].push_back(buffer.data);
}

std::int64_t HostBufferPool::heap_allocations() const {
  std::lock_guard lock(mutex_);
  return heap_allocations_;
}

std::int64_t HostBufferPool::spare() const {
  std::lock_guard lock(mutex_);
  std::int64_t n = 0;
  for (const auto& s : spare_) n += static_cast<std::int64_t>(s.size());
  return n;
}

}  // namespace sy
