// Serving metrics over a time window: throughput, time to first token, inter-token latency,
// and per-device busy and stall fractions, fed with nanosecond timestamps on any time base
// (virtual or wall clock) by the coordinator and, as a RuntimeObserver, by the workers.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/runtime_observer.h"
#include "engine/serving/request_observer.h"

namespace sy {

// Every StallReason, in report column order (update when the enum grows).
inline constexpr std::array<StallReason, 4> kStallReasons = {StallReason::QueueEmpty, StallReason::Barrier,
                                                             StallReason::Transfer, StallReason::Weights};
// In the enum's order: a reason's position is its value (stall_reason_index, per report).
static_assert([] {
  for (std::size_t i = 0; i < kStallReasons.size(); ++i)
    if (static_cast<std::size_t>(kStallReasons[i]) != i) return false;
  return true;
}());

struct LatencyStats {
  std::int64_t count = 0;  // samples in the window; the other fields are 0 when there are none
  double mean_ms = 0.0;
  double p50_ms = 0.0;
  double p90_ms = 0.0;
  double p99_ms = 0.0;
};

struct DeviceUsage {
  std::string name;
  double busy = 0.0;  // fraction of the window covered by executions
  std::array<double, kStallReasons.size()> stall{};  // fraction stalled, per kStallReasons entry
  // The rest of the window (busy + stalls + host = 1): neither executing nor stalled for one of
  // the runtime's reasons. On the cpu and cuda backends, the dispatch latency between the loop
  // starting an execution and the device starting it, and between the device finishing and the
  // loop taking its result; on the sim, whose executions start and end on the loop's clock, 0.
  double host = 0.0;
  std::int64_t executions = 0;  // executions that ended in the window
  double rows_per_execution = 0;  // their mean token rows: how well the device batches
  double executions_per_s = 0;    // executions / the window
  std::int64_t transfers = 0;     // shipments this device sent to another one (started in the window)
  double rows_per_transfer = 0;   // their mean token rows
  // Head-of-line queueing delay: for each batch an execution took from a μ-queue in the
  // window, how long its oldest row had waited there (ms).
  std::int64_t queue_waits = 0;
  double queue_wait_mean_ms = 0;
  double queue_wait_max_ms = 0;
};

struct MetricsReport {
  std::int64_t t_begin_ns = 0;
  std::int64_t t_end_ns = 0;
  double window_s = 0.0;
  std::int64_t tokens_generated = 0;
  std::int64_t requests_finished = 0;
  std::int64_t requests_rejected = 0;
  double tokens_per_s = 0.0;
  double requests_per_s = 0.0;  // finished requests
  LatencyStats ttft;            // first token − arrival
  LatencyStats itl;             // gap between consecutive tokens of one request
  std::vector<DeviceUsage> devices;
};

// Count, mean and nearest-rank p50/p90/p99 (ms) of latencies given in ns.
LatencyStats latency_stats(std::vector<double> ns);
// {"count", "mean", "p50", "p90", "p99"} in ms; the statistics are null when there are no samples.
nlohmann::json to_json(const LatencyStats& stats);
// Position of `reason` in kStallReasons (the report's column, a window's slot): its value.
constexpr std::size_t stall_reason_index(StallReason reason) { return static_cast<std::size_t>(reason); }

// Value at nearest rank ⌈p/100 · n⌉ (1-based) of ascending `sorted`; 0 when empty. No
// interpolation: every percentile reported is a latency that really occurred.
double percentile_nearest_rank(const std::vector<double>& sorted, std::int32_t percent);

// On the deployment's loop thread only, like every observer (workers and transports report
// from their events, other ranks' reports are relayed by post_external, and every reader runs
// on the loop or after it): no lock, since the simulator reports over a million events a
// second. Not copyable: the observers hold it by address.
class MetricsCollector : public RuntimeObserver, public RequestObserver {
 public:
  MetricsCollector() = default;
  MetricsCollector(const MetricsCollector&) = delete;
  MetricsCollector& operator=(const MetricsCollector&) = delete;

  // Names for report rows; devices without one are called dev<i>.
  void set_device_names(std::vector<std::string> names);

  void on_request_arrival(std::int64_t id, std::int64_t t);
  void on_request_admitted(std::int64_t id, std::int64_t t, std::int32_t dp_rank);
  // The first token of a request defines its TTFT, each later one an inter-token latency.
  void on_token(std::int64_t id, std::int64_t t);
  void on_request_finished(std::int64_t id, std::int64_t t);
  // A request refused by admission: counted apart, never as finished.
  void on_request_rejected(std::int64_t id, std::int64_t t);
  // RequestObserver: the coordinator's updates, dispatched to the calls above.
  void on_request(const RequestUpdate& update) override;
  // Drops what no report starting at or after `t` needs (finished requests, intervals and
  // executions that ended before t), so that a service running for days keeps bounded memory
  // and per-window reports stay cheap. Reports over earlier windows are incomplete afterwards.
  void forget_before(std::int64_t t);
  void on_device_busy(std::int32_t device, std::int64_t start, std::int64_t end);
  void on_device_stall(std::int32_t device, StallReason reason, std::int64_t start, std::int64_t end);

  // RuntimeObserver: executions are busy time, stalls are stalls.
  void on_execution(std::int32_t device, LayerKind kind, std::int32_t block, std::int32_t index, std::int32_t group,
                    std::int64_t tokens, std::int64_t start_ns, std::int64_t end_ns) override;
  void on_shared_expert(std::int32_t device, std::int32_t block, std::int32_t group, std::int64_t tokens,
                        std::int64_t start_ns, std::int64_t end_ns) override;
  void on_merge(std::int32_t device, std::int32_t block, std::int64_t tokens, std::int64_t start_ns,
                std::int64_t end_ns) override;
  void on_stall(std::int32_t device, StallReason reason, std::int64_t start_ns, std::int64_t end_ns) override;
  void on_routed(std::int32_t block, std::int32_t expert, std::int32_t device, std::int64_t tokens,
                 std::int64_t at_ns) override;
  void on_transfer(std::int32_t src, std::int32_t dst, std::int64_t tokens, std::int64_t bytes, std::int64_t start_ns,
                   std::int64_t end_ns) override;
  void on_queue_wait(std::int32_t device, const LayerId& queue, std::int64_t tokens, std::int64_t waited_ns,
                     std::int64_t at_ns) override;
  // Token rows routed to each expert since the start: [block][expert] (blocks without routing
  // stay empty).
  std::vector<std::vector<std::int64_t>> expert_load() const;
  // Token rows routed to each device's experts since the start: [device] (every block).
  std::vector<std::int64_t> routed_per_device() const;

  // Point events (tokens, finishes, rejections) count when t_begin < t <= t_end, so that
  // report(start, now) includes the last token and back-to-back windows never count an event
  // twice. A token's latency (TTFT or ITL) belongs to the window of the token. Busy and stall
  // intervals are clipped to [t_begin, t_end]; overlapping intervals of one device (and
  // reason) count once.
  MetricsReport report(std::int64_t t_begin, std::int64_t t_end) const;

 private:
  struct Request {
    std::int64_t arrival = -1;  // -1: never reported
    std::int64_t admitted = -1;
    std::int32_t rank = -1;
    std::vector<std::int64_t> tokens;
    bool first_forgotten = false;  // forget_before() dropped its first token(s)
    std::int64_t finished = -1;
  };
  struct Interval {
    std::int64_t start, end;
  };
  // When each rejection happened, in order: a flood of rejected requests costs 8 bytes each
  // here instead of a request entry each (and every report would walk those entries).
  std::vector<std::int64_t> rejected_at_;
  // Intervals of one device (and reason) as reported. They arrive in order of their ends, so
  // a window finds its intervals by binary search instead of scanning the whole history.
  struct IntervalLog {
    std::vector<Interval> intervals;
    bool ordered = true;          // ends non-decreasing so far
    std::int64_t longest = 0;     // the longest interval's length
    // Inline: every execution and stall lands here, and most continue the last interval.
    void add(Interval i) {
      if (ordered && !intervals.empty() && i.start <= intervals.back().end && i.end >= intervals.back().end) {
        // It continues the last interval (a busy device's next execution starts as the last
        // one ends): extend that one. Reports count the union clipped to their window, the
        // same either way; forget_before(t) keeps a stretch whole where it would have dropped
        // its early pieces, but those ended before t, so no window from t on reaches them. One
        // that also started earlier (a report that covers the last one) extends it back too.
        Interval& last = intervals.back();
        last.start = std::min(last.start, i.start);
        last.end = i.end;
        longest = std::max(longest, last.end - last.start);
        return;
      }
      append(i);
    }
    [[gnu::noinline]] void append(Interval i);
    // The intervals that may overlap [lo, hi], as (start, end) pairs.
    std::vector<std::pair<std::int64_t, std::int64_t>> overlapping(std::int64_t lo, std::int64_t hi) const;
    // The length of [lo, hi] that the intervals cover (their union, clipped).
    std::int64_t covered(std::int64_t lo, std::int64_t hi) const;
    void forget_before(std::int64_t t);
  };
  struct Execution {
    std::int64_t end;
    std::int64_t tokens;
  };
  // A device's transfers and queue waits, summed per 10 ms of time: a cluster sends hundreds
  // of thousands of shipments a second, too many to log one by one (a log cost the simulator
  // more memory than everything else it keeps). A window counts the buckets that start in it.
  static constexpr std::int64_t kBucketNs = 10'000'000;
  struct Bucket {
    std::int64_t index = 0;  // start / kBucketNs
    std::int64_t transfers = 0, transfer_rows = 0;
    std::int64_t waits = 0, waited_ns = 0, longest_wait_ns = 0;
  };
  struct BucketLog {
    std::vector<Bucket> buckets;  // ascending index
    // Where the newest bucket ends: a time before it (a late report too) joins that bucket.
    // The lowest time while there is none, so that the first report opens one.
    std::int64_t next_start = std::numeric_limits<std::int64_t>::min();
    // The bucket of time t (a late report joins the newest bucket). Inline, one comparison:
    // every transfer and queue take lands here.
    Bucket& at(std::int64_t t) {
      if (t < next_start) return buckets.back();
      return open(t);
    }
    // The bucket for a time at or past next_start, new once per 10 ms: out of line, so that the
    // reports landing in the newest bucket need no stack frame.
    [[gnu::noinline]] Bucket& open(std::int64_t t) {
      const std::int64_t index = std::max<std::int64_t>(0, t) / kBucketNs;
      if (buckets.empty() || buckets.back().index < index) buckets.push_back(Bucket{index});
      next_start = (buckets.back().index + 1) * kBucketNs;
      return buckets.back();
    }
    // Drops the buckets that ended by t.
    void forget_before(std::int64_t t) {
      std::erase_if(buckets, [t](const Bucket& b) { return (b.index + 1) * kBucketNs <= t; });
      if (buckets.empty()) next_start = std::numeric_limits<std::int64_t>::min();
    }
  };
  struct Device {
    IntervalLog busy;
    std::vector<Execution> executions;
    bool executions_ordered = true;  // by end, as a device that runs one at a time reports them
    std::array<IntervalLog, kStallReasons.size()> stall;
    BucketLog traffic;  // transfers by their start, queue waits by the take
  };

  // The device's record, made on first use; the common case inline (a call per report).
  Device& device(std::int32_t index) {
    if (index >= 0 && static_cast<std::size_t>(index) < devices_.size()) return devices_[static_cast<std::size_t>(index)];
    return add_device(index);
  }
  [[gnu::noinline]] Device& add_device(std::int32_t index);

  std::vector<std::string> names_;
  std::unordered_map<std::int64_t, Request> requests_;
  std::vector<Device> devices_;
  // on_routed's first report of a block, expert or device: grows the counts (out of line, as
  // above).
  [[gnu::noinline]] void add_routed(std::int32_t block, std::int32_t expert, std::int32_t device, std::int64_t tokens);
  std::vector<std::vector<std::int64_t>> expert_load_;  // [block][expert]
  std::vector<std::int64_t> routed_per_device_;          // [device]
};

nlohmann::json to_json(const MetricsReport& report);
// An aligned plain-text table for terminals and logs.
std::string format_table(const MetricsReport& report);
// "prefix cache: H of Q prompt tokens from the cache (P %)": what --prefix-caching served.
std::string describe_prefix_cache(std::int64_t hits, std::int64_t queries);

}  // namespace sy
