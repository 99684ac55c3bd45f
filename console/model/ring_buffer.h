// A fixed-capacity ring buffer that overwrites its oldest element when full: the console's
// bounded memory for live time series (queue depths, window summaries) on endless runs.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

namespace sy::console {

template <class T>
class RingBuffer {
 public:
  explicit RingBuffer(std::size_t capacity = 1024) : slots_(capacity == 0 ? 1 : capacity) {}

  std::size_t capacity() const { return slots_.size(); }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == slots_.size(); }
  // Elements overwritten because the buffer was full (never reset by pop_front).
  std::uint64_t overwritten() const { return overwritten_; }

  void push_back(const T& value) {
    slots_[(head_ + size_) % slots_.size()] = value;
    if (full()) {
      head_ = (head_ + 1) % slots_.size();
      ++overwritten_;
    } else {
      ++size_;
    }
  }

  // Drops the `n` oldest elements (all of them when n >= size()).
  void pop_front(std::size_t n = 1) {
    if (n >= size_) {
      clear();
      return;
    }
    head_ = (head_ + n) % slots_.size();
    size_ -= n;
  }

  void clear() {
    head_ = 0;
    size_ = 0;
  }

  // Index 0 is the oldest element.
  const T& operator[](std::size_t i) const {
    assert(i < size_);
    return slots_[(head_ + i) % slots_.size()];
  }
  T& operator[](std::size_t i) {
    assert(i < size_);
    return slots_[(head_ + i) % slots_.size()];
  }
  const T& front() const { return (*this)[0]; }
  const T& back() const { return (*this)[size_ - 1]; }
  T& back() { return (*this)[size_ - 1]; }

  // Random access so that std::lower_bound and friends work over the live contents.
  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;

    const_iterator() = default;
    const_iterator(const RingBuffer* ring, std::size_t index) : ring_(ring), index_(index) {}

    reference operator*() const { return (*ring_)[index_]; }
    pointer operator->() const { return &(*ring_)[index_]; }
    reference operator[](difference_type n) const { return (*ring_)[offset(n)]; }
    const_iterator& operator++() { ++index_; return *this; }
    const_iterator operator++(int) { auto copy = *this; ++index_; return copy; }
    const_iterator& operator--() { --index_; return *this; }
    const_iterator operator--(int) { auto copy = *this; --index_; return copy; }
    const_iterator& operator+=(difference_type n) { index_ = offset(n); return *this; }
    const_iterator& operator-=(difference_type n) { index_ = offset(-n); return *this; }
    friend const_iterator operator+(const_iterator it, difference_type n) { return it += n; }
    friend const_iterator operator+(difference_type n, const_iterator it) { return it += n; }
    friend const_iterator operator-(const_iterator it, difference_type n) { return it -= n; }
    friend difference_type operator-(const const_iterator& a, const const_iterator& b) {
      return static_cast<difference_type>(a.index_) - static_cast<difference_type>(b.index_);
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) { return a.index_ == b.index_; }
    friend auto operator<=>(const const_iterator& a, const const_iterator& b) { return a.index_ <=> b.index_; }
    std::size_t index() const { return index_; }

   private:
    std::size_t offset(difference_type n) const {
      return static_cast<std::size_t>(static_cast<difference_type>(index_) + n);
    }
    const RingBuffer* ring_ = nullptr;
    std::size_t index_ = 0;
  };

  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

 private:
  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  std::uint64_t overwritten_ = 0;
};

}  // namespace sy::console
