// An hour-long recording in the console under Xvfb (issue 19's test): the simulator at pace 0
// (`switchyard bench`, which runs unpaced) makes an hour of cluster time on a small, quiet
// cluster (Mixtral-8x7B's shape on one attention and one expert H100, 0.25 requests/s: about
// 14 M spans and 80 MB, some 12 s of wall time), and the console opens it by its overview,
// shows the whole run in every view and reads the spans of a zoom from the file. The open time
// is printed, not asserted (docs/console.md has the demo's hour, measured).
#include <gtest/gtest.h>

#include <QProcess>
#include <QTest>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "console/app/main_window.h"
#include "console/imgui_glue/imgui_widget.h"
#include "gui_environment.h"

namespace sy::console {
namespace {

namespace fs = std::filesystem;
constexpr std::int64_t kS = 1'000'000'000;

TEST(ConsoleHour, AnHourLongRecordingOpensByItsOverviewAndReadsDetailOnZoom) {
  ASSERT_NE(testing::gui_application(), nullptr);
  const std::string path = testing::scratch_dir() + "/hour.db";
  fs::remove(path);
  QProcess bench;
  bench.setProcessChannelMode(QProcess::MergedChannels);
  const auto made0 = std::chrono::steady_clock::now();
  bench.start(SY_SWITCHYARD_BIN, {"bench", "--backend", "sim", "--model", "mixtral-8x7b", "--layout",
                                  "disaggregated:1+1", "--rate", "0.25", "--duration", "3600", "--record",
                                  QString::fromStdString(path)});
  ASSERT_TRUE(bench.waitForStarted(10000));
  ASSERT_TRUE(bench.waitForFinished(300'000)) << "the hour took more than 5 minutes to simulate";
  ASSERT_EQ(bench.exitCode(), 0) << bench.readAll().toStdString();
  const double made_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - made0).count();
  std::printf("made an hour of cluster time in %.1f s: %.1f MB\n", made_s, static_cast<double>(fs::file_size(path)) / 1e6);

  MainWindow w;
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  const auto opened = testing::open_trace_and_draw(w, path);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  const double open_s = *opened;
  auto* timeline = w.findChild<ImGuiWidget*>("timelineView");
  std::printf("opened the hour by its overview in %.2f s\n", open_s);
  RecordProperty("overview_open_seconds", std::to_string(open_s));

  const ConsoleModel& m = w.model();
  ASSERT_TRUE(m.overview().has_value()) << "opened whole instead of by its overview";
  EXPECT_GT(m.overview()->spans, 4'000'000);
  EXPECT_GE(m.end_ns() - m.begin_ns(), 3600 * kS);
  EXPECT_TRUE(m.spans().empty()) << "the overview decodes no span block";
  QTest::qWait(400);
  // The timeline draws the whole hour from its windows: coloured blocks, not an empty view.
  EXPECT_GT(testing::count_span_colours(timeline->grabFramebuffer()).saturated, 500);
  // Every view reaches the run's first minutes: the queues' per-device windows, the folded
  // load windows and the summaries.
  const auto devices = m.queue_history().row_keys(QueueGrouping::Device);
  EXPECT_EQ(devices.size(), 2u);
  std::vector<double> bins(60, 0.0);
  for (const QueueKey& k : devices)
    m.queue_history().accumulate_bins(QueueGrouping::Device, k, m.begin_ns(), m.end_ns(), BinMode::Mean,
                                      std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::max(),
                                      bins);
  EXPECT_GT(*std::max_element(bins.begin(), bins.end()), 0.0) << "no queue depth over the hour";
  // The heatmap draws the devices' rows from those windows before any sample is read.
  auto* queues = w.findChild<ImGuiWidget*>("queuesDockView");
  ASSERT_NE(queues, nullptr);
  queues->requestFrames(2);
  QTest::qWait(300);
  const long heat = testing::count_span_colours(queues->grabFramebuffer()).saturated;
  std::printf("the μ-queue heatmap shows %ld strongly coloured pixels before any zoom\n", heat);
  // The dock's widgets alone (selectors, tabs) make about 700 (measured with the rows empty).
  EXPECT_GT(heat, 1400) << "no heat cells";
  const LoadWindow* early = m.load_at(m.begin_ns() + 60 * kS);
  ASSERT_NE(early, nullptr) << "no expert load for the run's first minute";
  EXPECT_LE(early->start_ns, m.begin_ns() + 60 * kS);
  const auto points = m.summary_points();
  ASSERT_FALSE(points.empty());
  EXPECT_LE(points.front()->t_begin_ns, m.begin_ns() + 2 * kS);

  // Zoom in (W) around the middle until the view is narrow enough to read its spans.
  timeline->setFocus();
  QTest::mouseMove(timeline, QPoint(timeline->width() / 2, timeline->height() / 2));
  QTest::qWait(150);
  const auto z0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 60 && m.spans().empty(); ++i) {
    QTest::keyClick(timeline, Qt::Key_W);
    QTest::qWait(150);
  }
  ASSERT_FALSE(m.spans().empty()) << "zooming in read no spans";
  std::printf("zoomed in and read %zu spans of %.3f s from the file in %.2f s\n", m.spans().size(),
              static_cast<double>(m.overview()->detail_t1_ns - m.overview()->detail_t0_ns) / 1e9,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - z0).count());
  EXPECT_LE(m.overview()->detail_t0_ns, w.viewState().view_t0_ns);
  EXPECT_GE(m.overview()->detail_t1_ns, w.viewState().view_t1_ns);
  EXPECT_LT(m.spans().size(), static_cast<std::size_t>(m.overview()->spans)) << "only the zoomed range is read";
  fs::remove(path);
}

}  // namespace
}  // namespace sy::console
