// μ-queue depth over time: one ring buffer of samples per queue (device, layer kind, block,
// index), step-function binning for the heatmap and line plot, and grouping of queues into rows.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "console/model/ring_buffer.h"
#include "telemetry/events.h"

namespace sy::console {

struct QueueKey {
  std::int32_t device = 0;
  telemetry::LayerKind layer = telemetry::LayerKind::Attention;
  std::int32_t block = 0;
  std::int32_t index = 0;
  auto operator<=>(const QueueKey&) const = default;
};

struct DepthPoint {
  std::int64_t t_ns = 0;
  std::int64_t depth_tokens = 0;
  std::int64_t oldest_age_ns = 0;
};

// How the heatmap folds queues into rows.
enum class QueueGrouping { EachQueue, DeviceBlock, Device };

struct QueueRow {
  QueueKey first;                // the row's first member (its device, and block for DeviceBlock)
  std::vector<QueueKey> members;
};

enum class BinMode { Mean, Max };

class QueueStore {
 public:
  explicit QueueStore(std::size_t per_queue_capacity = 4096) : capacity_(per_queue_capacity) {}

  // Capacity of series created from now on (a trace sets it to fit the whole recording).
  void set_per_queue_capacity(std::size_t capacity) { capacity_ = capacity; }
  std::size_t per_queue_capacity() const { return capacity_; }

  // A sample older than the last one of its queue is dropped (counted): depth is a step function.
  bool add(const telemetry::QueueSample& sample);
  void trim(std::int64_t cutoff_ns);
  void clear();

  std::size_t queue_count() const { return series_.size(); }
  std::vector<QueueKey> keys() const;
  const RingBuffer<DepthPoint>* series(const QueueKey& key) const;
  std::vector<QueueRow> rows(QueueGrouping grouping) const;

  // Depth at time t (the last sample at or before t); 0 before the first sample.
  std::int64_t depth_at(const QueueKey& key, std::int64_t t_ns) const;
  // Fills out[0..bins) with the queue's depth over [t0, t1) split into equal bins: the
  // time-weighted mean (Mean) or the largest value held (Max) in each bin. Adds to `out`, so a
  // row's members sum by calling it for each member on the same buffer.
  // Only the time inside [from_ns, to_ns) counts (the rest is drawn from the whole-run history).
  void accumulate_bins(const QueueKey& key, std::int64_t t0_ns, std::int64_t t1_ns, BinMode mode,
                       std::vector<double>& out, std::int64_t from_ns = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t to_ns = std::numeric_limits<std::int64_t>::max()) const;
  // Every queue's depth is known from this time on: before it, retention or a full ring dropped
  // samples of some queue (the minimum int64 while nothing was dropped).
  std::int64_t complete_from_ns() const { return complete_from_ns_; }

  std::int64_t max_depth_seen() const { return max_depth_; }
  std::uint64_t out_of_order() const { return out_of_order_; }

 private:
  std::size_t capacity_;
  std::map<QueueKey, RingBuffer<DepthPoint>> series_;
  std::int64_t max_depth_ = 0;
  std::uint64_t out_of_order_ = 0;
  std::int64_t complete_from_ns_ = std::numeric_limits<std::int64_t>::min();
};

}  // namespace sy::console
