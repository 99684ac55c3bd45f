// The metrics collector against hand-computed values: throughput, TTFT and ITL (nearest-rank
// percentiles), window boundaries, busy and stall fractions with overlaps and clipping, and
// the JSON and table renderings.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <sstream>
#include <vector>

#include "engine/serving/metrics.h"

namespace sy {
namespace {

constexpr std::int64_t ms = 1'000'000;

TEST(Percentile, NearestRank) {
  const std::vector<double> ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(percentile_nearest_rank(ten, 50), 5);   // rank ceil(5) = 5
  EXPECT_EQ(percentile_nearest_rank(ten, 99), 10);  // rank ceil(9.9) = 10
  EXPECT_EQ(percentile_nearest_rank(ten, 90), 9);   // rank 9 exactly
  EXPECT_EQ(percentile_nearest_rank(ten, 91), 10);  // rank ceil(9.1) = 10
  EXPECT_EQ(percentile_nearest_rank(ten, 0), 1);    // rank at least 1
  EXPECT_EQ(percentile_nearest_rank(ten, 100), 10);
  std::vector<double> hundred(100);
  for (int i = 0; i < 100; ++i) hundred[i] = i + 1;
  EXPECT_EQ(percentile_nearest_rank(hundred, 99), 99);  // 0.99 * 100 is not 98.999...
  EXPECT_EQ(percentile_nearest_rank(hundred, 50), 50);
  EXPECT_EQ(percentile_nearest_rank({7}, 99), 7);
  EXPECT_EQ(percentile_nearest_rank({1, 2, 3}, 50), 2);  // rank ceil(1.5) = 2
  EXPECT_EQ(percentile_nearest_rank({}, 50), 0);
}

// Request 1: arrives 0, tokens at 10, 15, 25 ms, finishes 25 ms.
// Request 2: arrives 5, tokens at 20, 22 ms, finishes 22 ms.
void feed_two_requests(MetricsCollector& m) {
  m.on_request_arrival(1, 0);
  m.on_request_admitted(1, 1 * ms, 0);
  m.on_request_arrival(2, 5 * ms);
  m.on_request_admitted(2, 6 * ms, 1);
  m.on_token(1, 10 * ms);
  m.on_token(1, 15 * ms);
  m.on_token(2, 20 * ms);
  m.on_token(2, 22 * ms);
  m.on_request_finished(2, 22 * ms);
  m.on_token(1, 25 * ms);
  m.on_request_finished(1, 25 * ms);
}

TEST(Metrics, ThroughputTtftAndItlOverTheWholeRun) {
  MetricsCollector m;
  feed_two_requests(m);
  const MetricsReport r = m.report(0, 100 * ms);
  EXPECT_DOUBLE_EQ(r.window_s, 0.1);
  EXPECT_EQ(r.tokens_generated, 5);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 50.0);
  EXPECT_EQ(r.requests_finished, 2);
  EXPECT_DOUBLE_EQ(r.requests_per_s, 20.0);
  EXPECT_EQ(r.requests_rejected, 0);
  // TTFT samples 10 and 15 ms.
  EXPECT_EQ(r.ttft.count, 2);
  EXPECT_DOUBLE_EQ(r.ttft.mean_ms, 12.5);
  EXPECT_DOUBLE_EQ(r.ttft.p50_ms, 10.0);  // rank ceil(1.0) = 1
  EXPECT_DOUBLE_EQ(r.ttft.p99_ms, 15.0);  // rank ceil(1.98) = 2
  // ITL samples 5, 10 (request 1) and 2 (request 2) ms.
  EXPECT_EQ(r.itl.count, 3);
  EXPECT_DOUBLE_EQ(r.itl.mean_ms, 17.0 / 3);
  EXPECT_DOUBLE_EQ(r.itl.p50_ms, 5.0);
  EXPECT_DOUBLE_EQ(r.itl.p99_ms, 10.0);
}

TEST(Metrics, LatenciesBelongToTheWindowOfTheirToken) {
  MetricsCollector m;
  feed_two_requests(m);
  // (12, 22]: tokens at 15 (req 1), 20 and 22 (req 2); 22 is the end, included.
  const MetricsReport r = m.report(12 * ms, 22 * ms);
  EXPECT_EQ(r.tokens_generated, 3);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 300.0);
  EXPECT_EQ(r.requests_finished, 1);  // request 2 at 22
  EXPECT_DOUBLE_EQ(r.requests_per_s, 100.0);
  EXPECT_EQ(r.ttft.count, 1);  // request 2's first token, 20 - 5
  EXPECT_DOUBLE_EQ(r.ttft.mean_ms, 15.0);
  EXPECT_EQ(r.itl.count, 2);  // 15 - 10 and 22 - 20, though 10 lies before the window
  EXPECT_DOUBLE_EQ(r.itl.mean_ms, 3.5);
  EXPECT_DOUBLE_EQ(r.itl.p50_ms, 2.0);
  EXPECT_DOUBLE_EQ(r.itl.p99_ms, 5.0);

  // The start is excluded: (10, 15] holds only the token at 15; back-to-back windows add up.
  EXPECT_EQ(m.report(10 * ms, 15 * ms).tokens_generated, 1);
  EXPECT_EQ(m.report(0, 15 * ms).tokens_generated + m.report(15 * ms, 30 * ms).tokens_generated, 5);
}

TEST(Metrics, TokensWithoutArrivalGiveNoTtftAndEmptyWindowsDoNotDivideByZero) {
  MetricsCollector m;
  m.on_token(9, 3 * ms);
  m.on_token(9, 4 * ms);
  MetricsReport r = m.report(0, 10 * ms);
  EXPECT_EQ(r.ttft.count, 0);
  EXPECT_EQ(r.ttft.mean_ms, 0.0);
  EXPECT_EQ(r.itl.count, 1);
  r = m.report(5 * ms, 5 * ms);
  EXPECT_EQ(r.window_s, 0.0);
  EXPECT_EQ(r.tokens_per_s, 0.0);
  EXPECT_EQ(r.requests_per_s, 0.0);
}

TEST(Metrics, RejectedRequestsAreNotFinished) {
  MetricsCollector m;
  m.on_request_arrival(1, 0);
  m.on_request_rejected(1, 2 * ms);
  m.on_request_arrival(2, 0);
  m.on_token(2, 3 * ms);
  m.on_request_finished(2, 3 * ms);
  const MetricsReport r = m.report(0, 10 * ms);
  EXPECT_EQ(r.requests_finished, 1);
  EXPECT_EQ(r.requests_rejected, 1);
  EXPECT_DOUBLE_EQ(r.requests_per_s, 100.0);
}

TEST(Metrics, BusyAndStallFractionsMergeOverlapsAndClipToTheWindow) {
  MetricsCollector m;
  m.set_device_names({"gpu0", "gpu1"});
  m.on_device_busy(0, 0, 10 * ms);
  m.on_device_busy(0, 5 * ms, 20 * ms);  // overlaps the first: union is [0, 20]
  m.on_device_stall(0, StallReason::QueueEmpty, 20 * ms, 30 * ms);
  m.on_device_stall(0, StallReason::Barrier, 30 * ms, 40 * ms);
  m.on_device_busy(2, 0, 40 * ms);  // no name given
  MetricsReport r = m.report(0, 40 * ms);
  ASSERT_EQ(r.devices.size(), 3u);
  EXPECT_EQ(r.devices[0].name, "gpu0");
  EXPECT_DOUBLE_EQ(r.devices[0].busy, 0.5);
  EXPECT_DOUBLE_EQ(r.devices[0].stall[0], 0.25);  // queue_empty
  EXPECT_DOUBLE_EQ(r.devices[0].stall[1], 0.25);  // barrier
  EXPECT_DOUBLE_EQ(r.devices[0].stall[2], 0.0);   // transfer
  EXPECT_EQ(r.devices[1].name, "gpu1");
  EXPECT_EQ(r.devices[1].busy, 0.0);
  EXPECT_EQ(r.devices[2].name, "dev2");
  EXPECT_DOUBLE_EQ(r.devices[2].busy, 1.0);

  // [15, 35] is 20 ms: busy 15-20 (5), queue_empty 20-30 (10), barrier 30-35 (5).
  r = m.report(15 * ms, 35 * ms);
  EXPECT_DOUBLE_EQ(r.devices[0].busy, 0.25);
  EXPECT_DOUBLE_EQ(r.devices[0].stall[0], 0.5);
  EXPECT_DOUBLE_EQ(r.devices[0].stall[1], 0.25);
  EXPECT_DOUBLE_EQ(r.devices[2].busy, 1.0);
}

// A busy device's executions follow each other end to start: the log keeps them as one
// stretch, and every window still sees exactly its part of it, before and after the history
// before a point is forgotten. Device 1 gets the same busy time as separate, gapped pieces.
TEST(Metrics, BackToBackIntervalsCountLikeTheirUnion) {
  MetricsCollector m;
  for (std::int64_t t = 0; t < 100 * ms; t += 10 * ms) m.on_device_busy(0, t, t + 10 * ms);  // [0, 100] in ten
  m.on_device_busy(0, 95 * ms, 105 * ms);   // overlaps the end
  m.on_device_busy(0, 120 * ms, 130 * ms);  // after a gap
  m.on_device_busy(1, 0, 40 * ms);
  m.on_device_busy(1, 50 * ms, 60 * ms);
  const auto busy = [&](std::int32_t d, std::int64_t lo, std::int64_t hi) { return m.report(lo, hi).devices[d].busy; };
  EXPECT_DOUBLE_EQ(busy(0, 0, 130 * ms), 115.0 / 130.0);
  EXPECT_DOUBLE_EQ(busy(0, 25 * ms, 35 * ms), 1.0);
  EXPECT_DOUBLE_EQ(busy(0, 100 * ms, 125 * ms), 10.0 / 25.0);
  EXPECT_DOUBLE_EQ(busy(1, 30 * ms, 55 * ms), 15.0 / 25.0);
  m.forget_before(45 * ms);
  EXPECT_DOUBLE_EQ(busy(0, 45 * ms, 130 * ms), 70.0 / 85.0);
  EXPECT_DOUBLE_EQ(busy(0, 50 * ms, 60 * ms), 1.0);
  EXPECT_DOUBLE_EQ(busy(1, 45 * ms, 65 * ms), 10.0 / 20.0);
}

// The busy fraction of random logs against the union computed by brute force: logs whose
// intervals come in end order (back to back, overlapping, nested inside a longer one) and logs
// out of order, over random windows, before and after forgetting the past.
TEST(Metrics, BusyFractionIsTheClippedUnionOfRandomLogs) {
  std::uint64_t state = 99;
  const auto below = [&](std::int64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(n));
  };
  for (int trial = 0; trial < 200; ++trial) {
    MetricsCollector m;
    std::vector<std::pair<std::int64_t, std::int64_t>> log;
    std::int64_t t = below(50);
    for (int i = 0; i < 60; ++i) {
      std::int64_t start = t + below(20) - 5, end = start + 1 + below(30);
      if (trial % 3 == 1 && below(4) == 0) {  // nested: ends first, started earlier
        end = t + 1;
        start = end - 1 - below(40);
      }
      if (trial % 3 == 2) start = below(2000), end = start + 1 + below(60);  // out of order
      t = std::max(t, end);
      m.on_device_busy(0, start, end);
      log.emplace_back(start, end);
    }
    std::int64_t forgotten = std::numeric_limits<std::int64_t>::min();
    for (int w = 0; w < 30; ++w) {
      if (w == 15) {
        forgotten = below(t);
        m.forget_before(forgotten);
      }
      std::int64_t lo = below(t + 50), hi = lo + 1 + below(300);
      if (forgotten != std::numeric_limits<std::int64_t>::min()) lo = std::max(lo, forgotten), hi = std::max(hi, lo + 1);
      std::vector<char> covered(static_cast<std::size_t>(hi - lo), 0);
      for (const auto& [s, e] : log)
        for (std::int64_t x = std::max(s, lo); x < std::min(e, hi); ++x) covered[static_cast<std::size_t>(x - lo)] = 1;
      const double expected = static_cast<double>(std::count(covered.begin(), covered.end(), 1)) /
                              static_cast<double>(hi - lo);
      EXPECT_DOUBLE_EQ(m.report(lo, hi).devices[0].busy, expected) << trial << ": [" << lo << ", " << hi << "]";
    }
  }
}

TEST(Metrics, IsARuntimeObserver) {
  MetricsCollector m;
  RuntimeObserver& observer = m;
  observer.on_execution(1, LayerKind::Expert, 3, 5, -1, 17, 10 * ms, 30 * ms);
  observer.on_stall(1, StallReason::Transfer, 30 * ms, 35 * ms);
  observer.on_transfer(0, 1, 17, 1024, 0, 10 * ms);  // not a device time: ignored
  const MetricsReport r = m.report(0, 40 * ms);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_DOUBLE_EQ(r.devices[1].busy, 0.5);
  EXPECT_DOUBLE_EQ(r.devices[1].stall[2], 0.125);
  EXPECT_EQ(r.devices[0].busy, 0.0);
}

TEST(Metrics, JsonCarriesEveryFigure) {
  MetricsCollector m;
  feed_two_requests(m);
  m.set_device_names({"gpu0"});
  m.on_device_busy(0, 0, 50 * ms);
  const nlohmann::json j = to_json(m.report(0, 100 * ms));
  EXPECT_EQ(j["window"]["seconds"], 0.1);
  EXPECT_EQ(j["window"]["end_ns"], 100 * ms);
  EXPECT_EQ(j["tokens_generated"], 5);
  EXPECT_EQ(j["tokens_per_s"], 50.0);
  EXPECT_EQ(j["requests_finished"], 2);
  EXPECT_EQ(j["ttft_ms"]["p99"], 15.0);
  EXPECT_EQ(j["itl_ms"]["count"], 3);
  EXPECT_EQ(j["devices"][0]["name"], "gpu0");
  EXPECT_EQ(j["devices"][0]["busy"], 0.5);
  EXPECT_EQ(j["devices"][0]["stall"]["queue_empty"], 0.0);
  EXPECT_TRUE(j["devices"][0]["stall"].contains("transfer"));
  // No samples: null, not a misleading 0.
  const nlohmann::json empty = to_json(MetricsCollector().report(0, ms));
  EXPECT_TRUE(empty["itl_ms"]["p50"].is_null());
  EXPECT_EQ(empty["itl_ms"]["count"], 0);
}

TEST(Metrics, TableIsAligned) {
  MetricsCollector m;
  feed_two_requests(m);
  m.set_device_names({"gpu0", "a-much-longer-name"});
  m.on_device_busy(0, 0, 50 * ms);
  m.on_device_stall(1, StallReason::Barrier, 0, 25 * ms);
  const std::string table = format_table(m.report(0, 100 * ms));
  EXPECT_EQ(table.substr(0, table.find("device")),
            "window      0.100 s\n"
            "throughput  50.0 tokens/s, 20.00 requests/s\n"
            "generated   5 tokens\n"
            "requests    2 finished, 0 rejected\n"
            "\n"
            "latency (ms)  n    mean     p50     p99\n"
            "TTFT          2  12.500  10.000  15.000\n"
            "ITL           3   5.667   5.000  10.000\n"
            "\n");
  // The device block: every row as wide as the header (right-aligned columns), the name column
  // as wide as its longest name.
  std::istringstream lines(table.substr(table.find("device")));
  std::string header, row0, row1;
  std::getline(lines, header);
  std::getline(lines, row0);
  std::getline(lines, row1);
  EXPECT_EQ(header,
            "device               busy  stall:queue_empty  stall:barrier  stall:transfer  stall:weights   host  executions"
            "  rows/exec  exec/s"
            "  wait ms  transfers  rows/xfer");
  // host: the rest of the window, neither busy nor stalled.
  EXPECT_EQ(row0,
            "gpu0                50.0%               0.0%           0.0%            0.0%           0.0%  50.0%           0"
            "        0.0       0"
            "     0.00          0        0.0");
  EXPECT_EQ(row1,
            "a-much-longer-name   0.0%               0.0%          25.0%            0.0%           0.0%  75.0%           0"
            "        0.0       0"
            "     0.00          0        0.0");
  EXPECT_EQ(row0.size(), header.size());
}

TEST(Metrics, ExecutionsAndRowsPerExecutionCountByEndTime) {
  MetricsCollector m;
  m.on_execution(0, LayerKind::Expert, 0, 1, -1, 4, 0, 10 * ms);
  m.on_execution(0, LayerKind::Expert, 1, 1, -1, 8, 10 * ms, 30 * ms);
  m.on_execution(0, LayerKind::Attention, 2, 0, -1, 60, 30 * ms, 120 * ms);  // ends after the window
  const MetricsReport r = m.report(0, 100 * ms);
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].executions, 2);
  EXPECT_DOUBLE_EQ(r.devices[0].rows_per_execution, 6.0);
  EXPECT_DOUBLE_EQ(r.devices[0].busy, 1.0);
  EXPECT_DOUBLE_EQ(r.devices[0].host, 0.0);
  EXPECT_EQ(to_json(r)["devices"][0]["executions"], 2);
  EXPECT_EQ(to_json(r)["devices"][0]["host"], 0.0);
  EXPECT_DOUBLE_EQ(r.devices[0].executions_per_s, 20.0);
}

TEST(Metrics, TransfersAndQueueWaitsPerDeviceInTheWindow) {
  MetricsCollector m;
  // Device 0 sends three shipments (6, 2, 10 rows), the last after the window.
  m.on_transfer(0, 1, 6, 600, 10 * ms, 12 * ms);
  m.on_transfer(0, 2, 2, 200, 20 * ms, 21 * ms);
  m.on_transfer(0, 1, 10, 1000, 150 * ms, 160 * ms);
  // Device 1 takes from its queues twice in the window: oldest rows waited 1 and 3 ms.
  m.on_queue_wait(1, LayerId::expert(0, 3), 4, 1 * ms, 30 * ms);
  m.on_queue_wait(1, LayerId::expert(1, 3), 8, 3 * ms, 60 * ms);
  m.on_queue_wait(1, LayerId::expert(2, 3), 8, 9 * ms, 100 * ms);  // the next window's first bucket
  const MetricsReport r = m.report(0, 100 * ms);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.devices[0].transfers, 2);
  EXPECT_DOUBLE_EQ(r.devices[0].rows_per_transfer, 4.0);
  EXPECT_EQ(r.devices[0].queue_waits, 0);
  EXPECT_EQ(r.devices[1].transfers, 0);
  EXPECT_EQ(r.devices[1].queue_waits, 2);
  EXPECT_DOUBLE_EQ(r.devices[1].queue_wait_mean_ms, 2.0);
  EXPECT_DOUBLE_EQ(r.devices[1].queue_wait_max_ms, 3.0);
  const auto j = to_json(r);
  EXPECT_EQ(j["devices"][0]["transfers"], 2);
  EXPECT_EQ(j["devices"][1]["queue_wait_ms"]["count"], 2);
  EXPECT_EQ(j["devices"][1]["queue_wait_ms"]["max"], 3.0);
  EXPECT_EQ(m.report(100 * ms, 200 * ms).devices[1].queue_waits, 1);
  // Forgetting the past drops them: a later window starts empty.
  m.forget_before(100 * ms);
  EXPECT_EQ(m.report(100 * ms, 200 * ms).devices[0].transfers, 1);
  EXPECT_EQ(m.report(0, 100 * ms).devices[1].queue_waits, 0);
  // With every bucket forgotten, a late report opens one again.
  m.forget_before(1000 * ms);
  m.on_transfer(0, 1, 3, 300, 50 * ms, 51 * ms);
  EXPECT_EQ(m.report(0, 100 * ms).devices[0].transfers, 1);
  EXPECT_EQ(m.report(0, 100 * ms).devices[0].rows_per_transfer, 3.0);
}

}  // namespace
}  // namespace sy
