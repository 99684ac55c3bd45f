// Reduced detail of the μ-queues over the whole run: per device × block and per device, the
// time-weighted mean and the peak of the tokens queued, in windows that fold as the run ages
// (folding_windows.h). The heatmap draws from it where the queue samples are no longer held.
#pragma once

#include <cstddef>
#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "console/model/folding_windows.h"
#include "console/model/queue_store.h"
#include "telemetry/events.h"

namespace sy::console {

struct QueueWindow {
  double token_ns = 0;      // integral of the row's total depth over the window
  std::int32_t peak = -1;   // largest total depth the row held in it; -1: none known (a
                            // recording's windows carry the integral only)
  void merge(const QueueWindow& o) {
    token_ns += o.token_ns;
    peak = std::max(peak, o.peak);
  }
  void raise(std::int64_t depth) {
    peak = std::max(peak, static_cast<std::int32_t>(std::min<std::int64_t>(depth, INT32_MAX)));
  }
};

class QueueHistory {
 public:
  static constexpr std::int64_t kWindowNs = 1'000'000'000;  // 1 s, the recorder's window
  // A row folds its windows in pairs rather than hold more: a device's hour stays at 1 s, a
  // device × block row's (the demo has hundreds) goes to 4 s; 16 bytes a window.
  static constexpr std::size_t kMaxDeviceWindows = 4096;
  static constexpr std::size_t kMaxBlockWindows = 1024;

  // A sample of one queue; samples of a queue arrive in time order (a late one is dropped).
  void add(const telemetry::QueueSample& q);
  // A recording's per-device window (SPAN_WINDOWS.queue_token_ns): the mean, no peak.
  void add_device_window(std::int32_t device, std::int64_t start_ns, std::int64_t window_ns, std::int64_t queue_token_ns);
  void clear();

  // The row's windows: (device, layer, block) for DeviceBlock, the device for Device; null
  // for EachQueue (the history keeps no single queue) and for rows it has not seen.
  const FoldingWindows<QueueWindow>* row(QueueGrouping grouping, const QueueKey& first) const;
  // The rows the history knows at this grouping (first member only), in the store's order.
  std::vector<QueueKey> row_keys(QueueGrouping grouping) const;
  // Fills out[0..bins) over [t0, t1) like QueueStore::accumulate_bins (mean: time-weighted over
  // the windows a bin overlaps; peak: the largest window peak), counting only the time outside
  // [held0, held1) (where the samples are held and draw instead). Adds (mean) or raises (peak).
  void accumulate_bins(QueueGrouping grouping, const QueueKey& first, std::int64_t t0, std::int64_t t1, BinMode mode,
                       std::int64_t held0, std::int64_t held1, std::vector<double>& out) const;
  std::int64_t begin_ns() const;
  std::int64_t end_ns() const;
  std::size_t held_bytes() const;

 private:
  struct Row {
    explicit Row(std::size_t max_windows) : windows(kWindowNs, max_windows) {}
    FoldingWindows<QueueWindow> windows;
    std::int64_t total = 0;   // tokens queued now, over the row's queues
    std::int64_t last_t = 0;  // time up to which `total` is integrated
    bool started = false;
    void step(std::int64_t t, std::int64_t delta);
  };
  using BlockKey = std::tuple<std::int32_t, int, std::int32_t>;  // device, layer, block

  std::map<QueueKey, std::int64_t> depth_;  // each queue's last depth
  std::map<BlockKey, Row> blocks_;
  std::map<std::int32_t, Row> devices_;
};

}  // namespace sy::console
