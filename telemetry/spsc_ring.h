// A bounded lock-free single-producer/single-consumer ring of trivially copyable records: the
// path by which a worker hands telemetry to the publisher without locks, waits or allocation.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

namespace sy::telemetry {

template <class T>
class SpscRing {
  static_assert(std::is_trivially_copyable_v<T>, "records cross threads by copy");

 public:
  // Capacity is rounded up to a power of two (at least 2) so that an index maps to a slot by a mask.
  explicit SpscRing(std::size_t capacity)
      : capacity_(std::bit_ceil(capacity < 2 ? std::size_t{2} : capacity)),
        mask_(capacity_ - 1),
        slots_(std::make_unique<T[]>(capacity_)) {}

  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  std::size_t capacity() const { return capacity_; }

  // Producer thread only. Never blocks or allocates: when the ring is full the record is
  // dropped and counted, because a worker must never wait for telemetry.
  bool push(const T& record) noexcept {
    if (try_push(record)) return true;
    dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    return false;
  }

  // Producer thread only: push() without counting a drop; false when the ring is full.
  bool try_push(const T& record) noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - cached_tail_ >= capacity_) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head - cached_tail_ >= capacity_) return false;
    }
    slots_[head & mask_] = record;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Consumer thread only. Moves up to `max` records into `out`; returns how many.
  std::size_t pop(T* out, std::size_t max) noexcept {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    std::uint64_t available = cached_head_ - tail;
    if (available < max) {
      cached_head_ = head_.load(std::memory_order_acquire);
      available = cached_head_ - tail;
    }
    if (available == 0) return 0;
    const std::size_t n = available < max ? static_cast<std::size_t>(available) : max;
    for (std::size_t i = 0; i < n; ++i) out[i] = slots_[(tail + i) & mask_];
    tail_.store(tail + n, std::memory_order_release);
    return n;
  }

  // Any thread; approximate while the producer and consumer run.
  std::size_t size() const noexcept {
    return static_cast<std::size_t>(head_.load(std::memory_order_acquire) - tail_.load(std::memory_order_acquire));
  }
  // Records dropped because the ring was full (any thread).
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

 private:
  // Destructive interference size is not stable across compilers; 64 bytes is every x86/ARM server's line.
  static constexpr std::size_t kLine = 64;

  const std::size_t capacity_;
  const std::size_t mask_;
  std::unique_ptr<T[]> slots_;

  // The producer's line: its index, its view of the consumer's index, its drop counter.
  alignas(kLine) std::atomic<std::uint64_t> head_{0};
  std::uint64_t cached_tail_ = 0;
  std::atomic<std::uint64_t> dropped_{0};
  // The consumer's line.
  alignas(kLine) std::atomic<std::uint64_t> tail_{0};
  std::uint64_t cached_head_ = 0;
  // alignas makes sizeof a multiple of the line, so whatever follows the ring starts on a line of its own.
};

}  // namespace sy::telemetry
