// The whole run at reduced detail for the μ-queue heatmap, the expert-load view and the charts:
// folding windows, what they keep of each quantity, and bounded memory over an hour-long run.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <string>

#include "console/model/console_model.h"
#include "console/model/folding_windows.h"
#include "console/model/load_history.h"
#include "console/model/queue_history.h"
#include "console/model/summary_history.h"

namespace sy::console {
namespace {

using telemetry::LayerKind;
constexpr std::int64_t kS = 1'000'000'000;
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

struct Count {
  std::int64_t n = 0;
  void merge(const Count& o) { n += o.n; }
};

TEST(FoldingWindows, FoldInPairsPastTheCapKeepingEveryTotal) {
  FoldingWindows<Count> w(10, 4);
  for (std::int64_t t = 0; t < 40; ++t) w.at(t)->n += 1;
  ASSERT_EQ(w.window_ns(), 10);
  ASSERT_EQ(w.size(), 4u);
  w.at(45)->n += 1;  // a fifth window: pairs fold, windows of 20
  EXPECT_EQ(w.window_ns(), 20);
  EXPECT_EQ(w.size(), 3u);
  EXPECT_EQ(w.begin_ns(), 0);
  EXPECT_EQ(w[0].n, 20);
  EXPECT_EQ(w[1].n, 20);
  EXPECT_EQ(w[2].n, 1);
  // Before the first window: kept while the cap allows, else dropped.
  EXPECT_EQ(w.at(-100), nullptr);
  ASSERT_NE(w.at(-5), nullptr);
  EXPECT_EQ(w.begin_ns(), -20);
  EXPECT_EQ(w.size(), 4u);
}

TEST(FoldingWindows, FoldAlignsAnOddOriginToTheLongerWindow) {
  FoldingWindows<Count> w(10, 2);
  w.at(10)->n = 1;
  w.at(20)->n = 2;
  w.at(30)->n += 4;  // fold: windows of 20 aligned to 0, so [0, 20) holds the first, [20, 40) the rest
  EXPECT_EQ(w.window_ns(), 20);
  EXPECT_EQ(w.begin_ns(), 0);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].n, 1);
  EXPECT_EQ(w[1].n, 6);
}

QueueWindow spread_sum(const FoldingWindows<QueueWindow>& s) {
  QueueWindow all;
  for (std::size_t i = 0; i < s.size(); ++i) all.merge(s[i]);
  return all;
}

telemetry::QueueSample sample(std::int32_t device, std::int32_t block, std::int32_t index, std::int64_t t,
                              std::int64_t depth) {
  telemetry::QueueSample q;
  q.device = device;
  q.layer = LayerKind::Expert;
  q.block = block;
  q.index = index;
  q.t_ns = t;
  q.depth_tokens = depth;
  return q;
}

TEST(QueueHistory, RowsHoldTheMeanAndThePeakOfTheirTotal) {
  QueueHistory h;
  // Two queues of device 0, block 1: 4 tokens over [0, 1.5 s), 6 over [0.5 s, 1 s).
  h.add(sample(0, 1, 0, 0, 4));
  h.add(sample(0, 1, 1, kS / 2, 6));
  h.add(sample(0, 1, 1, kS, 0));
  h.add(sample(0, 1, 0, 3 * kS / 2, 0));
  const auto* row = h.row(QueueGrouping::DeviceBlock, {0, LayerKind::Expert, 1, 0});
  ASSERT_NE(row, nullptr);
  ASSERT_EQ(row->size(), 2u);
  EXPECT_DOUBLE_EQ((*row)[0].token_ns, 4.0 * kS + 6.0 * kS / 2);
  EXPECT_EQ((*row)[0].peak, 10);  // the total, not one queue
  EXPECT_DOUBLE_EQ((*row)[1].token_ns, 4.0 * kS / 2);
  EXPECT_EQ((*row)[1].peak, 4);
  const auto* dev = h.row(QueueGrouping::Device, {0, LayerKind::Attention, 0, 0});
  ASSERT_NE(dev, nullptr);
  EXPECT_DOUBLE_EQ(spread_sum(*dev).token_ns, 4.0 * 1.5 * kS + 6.0 * kS / 2);
  EXPECT_EQ(h.row(QueueGrouping::EachQueue, {0, LayerKind::Expert, 1, 0}), nullptr);

  // Bins: the mean of the windows a bin overlaps, only outside the held range.
  std::vector<double> bins(2, 0.0);
  h.accumulate_bins(QueueGrouping::DeviceBlock, {0, LayerKind::Expert, 1, 0}, 0, 2 * kS, BinMode::Mean, kMax, kMax,
                    bins);
  EXPECT_DOUBLE_EQ(bins[0], 7.0);
  EXPECT_DOUBLE_EQ(bins[1], 2.0);
  std::vector<double> outside(2, 0.0);
  h.accumulate_bins(QueueGrouping::DeviceBlock, {0, LayerKind::Expert, 1, 0}, 0, 2 * kS, BinMode::Mean, kS, kMax,
                    outside);
  EXPECT_DOUBLE_EQ(outside[0], 7.0);
  EXPECT_DOUBLE_EQ(outside[1], 0.0);  // held: the samples draw it
  std::vector<double> peaks(2, 0.0);
  h.accumulate_bins(QueueGrouping::DeviceBlock, {0, LayerKind::Expert, 1, 0}, 0, 2 * kS, BinMode::Max, kMax, kMax,
                    peaks);
  EXPECT_DOUBLE_EQ(peaks[0], 10.0);
  EXPECT_DOUBLE_EQ(peaks[1], 4.0);
}

TEST(QueueHistory, ARecordingsDeviceWindowsGiveMeansButNoPeaks) {
  QueueHistory h;
  h.add_device_window(2, 0, kS, 5 * kS);  // 5 tokens on average
  ASSERT_EQ(h.row_keys(QueueGrouping::Device).size(), 1u);
  EXPECT_TRUE(h.row_keys(QueueGrouping::DeviceBlock).empty());
  std::vector<double> mean(4, 0.0), peak(4, 0.0);
  h.accumulate_bins(QueueGrouping::Device, {2, LayerKind::Attention, 0, 0}, 0, kS, BinMode::Mean, kMax, kMax, mean);
  h.accumulate_bins(QueueGrouping::Device, {2, LayerKind::Attention, 0, 0}, 0, kS, BinMode::Max, kMax, kMax, peak);
  for (double v : mean) EXPECT_DOUBLE_EQ(v, 5.0);
  for (double v : peak) EXPECT_DOUBLE_EQ(v, 0.0);
}

telemetry::ExpertLoad load(std::int64_t start, std::int32_t block, std::int32_t expert, std::int32_t device,
                           std::int64_t tokens) {
  telemetry::ExpertLoad l;
  l.window_start_ns = start;
  l.window_end_ns = start + kS;
  l.block = block;
  l.expert = expert;
  l.device = device;
  l.tokens = tokens;
  return l;
}

TEST(LoadHistory, FoldedWindowsSumTokensPerExpertAndReplica) {
  LoadHistory h;
  const std::int64_t windows = static_cast<std::int64_t>(LoadHistory::kMaxWindows) + 1;  // one fold
  for (std::int64_t i = 0; i < windows; ++i) {
    h.add(load(i * kS, 0, 1, 3, 10));
    h.add(load(i * kS, 0, 0, 2, i));
  }
  EXPECT_EQ(h.window_ns(), 2 * kS);
  auto w = h.at(5 * kS + kS / 2);  // folded window [4 s, 6 s)
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->start_ns, 4 * kS);
  EXPECT_EQ(w->end_ns, 6 * kS);
  ASSERT_EQ(w->records.size(), 2u);
  EXPECT_EQ(w->records[0].expert, 0);  // ordered by (block, expert, device)
  EXPECT_EQ(w->records[0].tokens, 4 + 5);
  EXPECT_EQ(w->records[1].tokens, 20);
  EXPECT_EQ(w->records[1].window_start_ns, 4 * kS);
  EXPECT_FALSE(h.at(-kS).has_value());
}

SummaryPoint summary(std::int64_t t, double tokens_per_s, double itl_p99, std::int64_t itl_count) {
  SummaryPoint p;
  p.t_begin_ns = t;
  p.t_end_ns = t + kS;
  p.tokens_per_s = tokens_per_s;
  p.requests_finished = 2;
  p.itl_ms.count = itl_count;
  p.itl_ms.p99 = itl_p99;
  p.devices.push_back({0, 0.5, 0.1, 0, 0, 0, 10, 4.0});
  return p;
}

TEST(SummaryHistory, FoldedWindowsWeighRatesByTimeAndLatenciesByCount) {
  SummaryPoint a = summary(0, 100, 10, 1);
  fold_summary(a, summary(kS, 300, 40, 3));
  EXPECT_EQ(a.t_begin_ns, 0);
  EXPECT_EQ(a.t_end_ns, 2 * kS);
  EXPECT_DOUBLE_EQ(a.tokens_per_s, 200);
  EXPECT_EQ(a.requests_finished, 4);
  EXPECT_DOUBLE_EQ(a.itl_ms.p99, (10.0 + 3 * 40.0) / 4);
  EXPECT_EQ(a.itl_ms.count, 4);
  ASSERT_EQ(a.devices.size(), 1u);
  EXPECT_DOUBLE_EQ(a.devices[0].busy, 0.5);
  EXPECT_EQ(a.devices[0].executions, 20);
  // A window no request measured does not pull the latency towards zero.
  fold_summary(a, summary(2 * kS, 200, 0, 0));
  EXPECT_DOUBLE_EQ(a.itl_ms.p99, (10.0 + 3 * 40.0) / 4);

  SummaryHistory h;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(SummaryHistory::kMaxWindows) + 1; ++i)
    h.add(summary(i * kS, static_cast<double>(i % 2), 1, 1));
  EXPECT_EQ(h.window_ns(), 2 * kS);
  const auto pts = h.points(kMax);
  ASSERT_EQ(pts.size(), SummaryHistory::kMaxWindows / 2 + 1);
  EXPECT_DOUBLE_EQ(pts[0]->tokens_per_s, 0.5);
  EXPECT_EQ(pts[0]->t_end_ns - pts[0]->t_begin_ns, 2 * kS);
}

std::string summary_json(std::int64_t t, double tokens_per_s) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                R"({"t_begin_ns":%lld,"t_end_ns":%lld,"tokens_per_s":%g,"devices":[{"device":0,"busy":0.5}]})",
                static_cast<long long>(t), static_cast<long long>(t + kS), tokens_per_s);
  return buf;
}

// An hour of a live run, with retention trimming as the console does: the heatmap, the load
// view and the charts still reach its first second, from memory that stops growing.
TEST(ConsoleModel, AnHourLiveKeepsTheWholeRunAtReducedDetailInBoundedMemory) {
  ConsoleModel m;
  m.set_retention({120 * kS, 1'000'000});
  std::size_t bytes_at_half = 0;
  const std::int64_t seconds = 3600;
  for (std::int64_t s = 0; s < seconds; ++s) {
    // Two queues of one block, each sampled twice a second: 2 tokens while the first half of
    // the run lasts, 8 after.
    const std::int64_t depth = s < seconds / 2 ? 2 : 8;
    for (std::int64_t half = 0; half < 2; ++half)
      for (int q = 0; q < 2; ++q) m.add_queue_sample(sample(0, 0, q, s * kS + half * kS / 2, depth));
    for (std::int32_t e = 0; e < 4; ++e) m.add_expert_load(load(s * kS, 0, e, 1, s < seconds / 2 ? 10 : 30));
    m.add_summary_json(summary_json(s * kS, static_cast<double>(s < seconds / 2 ? 100 : 300)));
    if (s % 10 == 0) m.apply_retention();
    if (s == seconds / 2)
      bytes_at_half = m.queue_history().held_bytes() + m.load_history().held_bytes() + m.summary_history().held_bytes();
  }
  m.apply_retention();
  ASSERT_EQ(m.last_error(), "");
  const std::size_t bytes =
      m.queue_history().held_bytes() + m.load_history().held_bytes() + m.summary_history().held_bytes();
  EXPECT_LT(bytes, 4u << 20);  // an hour in under 4 MB
  EXPECT_LT(bytes, bytes_at_half * 2);  // folding: the second half costs less than the first

  // μ-queues: samples held for the retention's 2 minutes only; the history covers the rest.
  const auto [held0, held1] = m.queue_samples_held();
  EXPECT_GE(held0, (seconds - 121) * kS);
  EXPECT_EQ(held1, kMax);
  std::vector<double> bins(4, 0.0);
  const QueueKey row{0, LayerKind::Expert, 0, 0};
  const auto rows = m.queues().rows(QueueGrouping::DeviceBlock);
  ASSERT_EQ(rows.size(), 1u);
  for (const QueueKey& k : rows[0].members) m.queues().accumulate_bins(k, 0, seconds * kS, BinMode::Mean, bins, held0, held1);
  m.queue_history().accumulate_bins(QueueGrouping::DeviceBlock, row, 0, seconds * kS, BinMode::Mean, held0, held1, bins);
  EXPECT_NEAR(bins[0], 4.0, 1e-9);   // two queues of 2 tokens
  EXPECT_NEAR(bins[1], 4.0, 1e-9);
  EXPECT_NEAR(bins[2], 16.0, 1e-9);  // then of 8
  EXPECT_NEAR(bins[3], 16.0, 1e-9);  // partly from the held samples, seamlessly

  // Expert load: the first minutes from a folded window, the last exact.
  const LoadWindow* early = m.load_at(10 * kS);
  ASSERT_NE(early, nullptr);
  EXPECT_GT(early->end_ns - early->start_ns, kS);
  EXPECT_LE(early->start_ns, 10 * kS);
  EXPECT_GT(early->end_ns, 10 * kS);
  const std::int64_t folded_s = (early->end_ns - early->start_ns) / kS;
  ASSERT_EQ(early->records.size(), 4u);
  EXPECT_EQ(early->records[0].tokens, 10 * folded_s);
  const LoadWindow* late = m.load_at((seconds - 1) * kS);
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->end_ns - late->start_ns, kS);
  EXPECT_EQ(late->records[0].tokens, 30);

  // Charts: the run from its first window; the held summaries after the folded ones.
  const auto pts = m.summary_points();
  ASSERT_FALSE(pts.empty());
  EXPECT_EQ(pts.front()->t_begin_ns, 0);
  EXPECT_EQ(pts.back()->t_end_ns, seconds * kS);
  for (std::size_t i = 1; i < pts.size(); ++i) EXPECT_GE(pts[i]->t_begin_ns, pts[i - 1]->t_end_ns);
  ASSERT_NE(m.summary_at(5 * kS), nullptr);
  EXPECT_DOUBLE_EQ(m.summary_at(5 * kS)->tokens_per_s, 100);
  EXPECT_DOUBLE_EQ(m.summary_at((seconds - 5) * kS)->tokens_per_s, 300);

  m.clear();
  EXPECT_TRUE(m.summary_points().empty());
  EXPECT_EQ(m.load_at(10 * kS), nullptr);
  EXPECT_TRUE(m.queue_history().row_keys(QueueGrouping::Device).empty());
}

// A recording loaded whole holds every queue sample: the history is not drawn from.
TEST(ConsoleModel, ATraceHoldsItsQueueSamplesWhole) {
  ConsoleModel m;
  m.set_bounded(false);
  m.add_queue_sample(sample(0, 0, 0, 0, 1));
  const auto [a, b] = m.queue_samples_held();
  EXPECT_EQ(a, kMin);
  EXPECT_EQ(b, kMax);
}

}  // namespace
}  // namespace sy::console
