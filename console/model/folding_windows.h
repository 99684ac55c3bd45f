// Whole-run reduced detail of one quantity: equal windows of run time aligned to multiples of
// their length, each folding what fell into it; when a run outgrows the window cap, neighbouring
// windows fold in pairs and the length doubles, so memory stays bounded however long the run.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>

#include "telemetry/span_windows.h"

namespace sy::console {

// T: default-constructed is an empty window; `void merge(const T& later)` folds the window after
// it into it (the pair becomes one window of twice the length).
template <typename T>
class FoldingWindows {
 public:
  FoldingWindows(std::int64_t window_ns, std::size_t max_windows) : window_ns_(window_ns), max_windows_(max_windows) {}

  std::int64_t window_ns() const { return window_ns_; }
  std::size_t size() const { return windows_.size(); }
  bool empty() const { return windows_.empty(); }
  std::int64_t begin_ns() const { return origin_ns_; }
  std::int64_t end_ns() const { return origin_ns_ + static_cast<std::int64_t>(windows_.size()) * window_ns_; }
  std::int64_t start_of(std::size_t i) const { return origin_ns_ + static_cast<std::int64_t>(i) * window_ns_; }
  const T& operator[](std::size_t i) const { return windows_[i]; }
  T& operator[](std::size_t i) { return windows_[i]; }
  // Index of the window holding t, clamped to [0, size()].
  std::size_t index_at(std::int64_t t) const {
    if (windows_.empty() || t < origin_ns_) return 0;
    return std::min(windows_.size(), static_cast<std::size_t>((t - origin_ns_) / window_ns_));
  }

  // The window holding t, created with any between it and those held (folding as the cap
  // requires). Null when t lies before the first window by more than the cap allows: a late
  // record of a time already folded away is dropped rather than reopen the whole run.
  T* at(std::int64_t t) {
    if (!cover(t)) return nullptr;
    return &windows_[static_cast<std::size_t>((t - origin_ns_) / window_ns_)];
  }

  // Calls f(window, overlap_ns) for each window that [a, b) overlaps, creating them.
  template <typename F>
  void spread(std::int64_t a, std::int64_t b, F&& f) {
    if (b <= a) return;
    if (!cover(b - 1)) return;
    if (!cover(a)) a = std::max(a, origin_ns_);
    for (std::size_t i = index_at(a); i < windows_.size(); ++i) {
      const std::int64_t lo = start_of(i), hi = lo + window_ns_;
      if (lo >= b) break;
      const std::int64_t overlap = std::min(hi, b) - std::max(lo, a);
      if (overlap > 0) f(windows_[i], overlap);
    }
  }

  void clear(std::int64_t window_ns) {
    windows_.clear();
    window_ns_ = window_ns;
    origin_ns_ = 0;
  }

 private:
  // Makes the windows reach t; false when t is too far before them.
  bool cover(std::int64_t t) {
    if (windows_.empty()) {
      origin_ns_ = telemetry::window_start(t, window_ns_);
      windows_.emplace_back();
      return true;
    }
    if (t < origin_ns_) {
      const auto before = static_cast<std::size_t>((origin_ns_ - telemetry::window_start(t, window_ns_)) / window_ns_);
      if (before + windows_.size() > max_windows_) return false;
      for (std::size_t i = 0; i < before; ++i) windows_.emplace_front();
      origin_ns_ -= static_cast<std::int64_t>(before) * window_ns_;
      return true;
    }
    while (t >= end_ns()) {
      windows_.emplace_back();
      if (windows_.size() > max_windows_) fold();
    }
    return true;
  }

  // Neighbouring pairs become one window of twice the length, aligned to its multiples.
  void fold() {
    const std::int64_t w2 = window_ns_ * 2;
    if (telemetry::window_start(origin_ns_, w2) != origin_ns_) {
      windows_.emplace_front();
      origin_ns_ -= window_ns_;
    }
    std::deque<T> folded;
    for (std::size_t i = 0; i < windows_.size(); i += 2) {
      folded.push_back(std::move(windows_[i]));
      if (i + 1 < windows_.size()) folded.back().merge(windows_[i + 1]);
    }
    windows_ = std::move(folded);
    window_ns_ = w2;
  }

  std::int64_t window_ns_;
  std::size_t max_windows_;
  std::int64_t origin_ns_ = 0;
  std::deque<T> windows_;
};

}  // namespace sy::console
