// Expert load by window: the expert_load records of each window (tokens per block, expert and
// replica device), the last N windows kept, looked up as "the latest" or "the one at time t".
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "telemetry/events.h"

namespace sy::console {

struct LoadWindow {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::vector<telemetry::ExpertLoad> records;
};

class ExpertLoadStore {
 public:
  explicit ExpertLoadStore(std::size_t max_windows = 900) : max_windows_(max_windows) {}

  void set_max_windows(std::size_t n) { max_windows_ = n; }
  // Records arrive grouped by window; a record for a window older than the newest kept one is
  // placed in its window when that window is still held, else dropped.
  void add(const telemetry::ExpertLoad& record);
  void trim(std::int64_t cutoff_ns);
  void clear() { windows_.clear(); }

  std::size_t window_count() const { return windows_.size(); }
  const LoadWindow* latest() const { return windows_.empty() ? nullptr : &windows_.back(); }
  // The window containing t (start <= t < end); else the last one ending at or before t; else null.
  const LoadWindow* at(std::int64_t t_ns) const;
  const std::deque<LoadWindow>& windows() const { return windows_; }

 private:
  std::size_t max_windows_;
  std::deque<LoadWindow> windows_;  // ordered by start
};

}  // namespace sy::console
