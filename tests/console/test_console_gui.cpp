// The console's GUI under Xvfb: opening a recorded trace shows the views, the scrubber drives
// them, the timeline answers keys and the wheel through the Qt/ImGui glue, errors are reported,
// and the command-line automation writes a screenshot that is not blank.
#include <gtest/gtest.h>

#include <QDockWidget>
#include <QFile>
#include <QGuiApplication>
#include <QLabel>
#include <QScreen>
#include <QProcess>
#include <QProcessEnvironment>
#include <QSlider>
#include <QTest>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "console/app/command_line.h"
#include "console/app/log_panel.h"
#include "console/app/main_window.h"
#include "console/imgui_glue/imgui_widget.h"
#include "console/views/timeline_view.h"
#include "gui_environment.h"
#include "synthetic_trace.h"

namespace sy::console {
namespace {

namespace fs = std::filesystem;
using testing::count_span_colours;
using testing::gui_application;
using testing::luminance_stddev;
using testing::scratch_dir;

class ConsoleGui : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (gui_application() == nullptr) return;
    trace_ = scratch_dir() + "/trace.db";
    auto counts = testing::write_synthetic_trace(trace_, 3);
    ASSERT_TRUE(counts.ok()) << counts.status().message();
    counts_ = *counts;
  }
  void SetUp() override { ASSERT_NE(gui_application(), nullptr); }

  // Lets the event loop run: timers tick, widgets paint.
  static void settle(int ms = 400) { QTest::qWait(ms); }

  static inline std::string trace_;
  static inline testing::SyntheticTraceCounts counts_;
};

TEST_F(ConsoleGui, OpensARecordedTraceWithEveryView) {
  MainWindow w;
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  const auto st = w.openTrace(QString::fromStdString(trace_));
  ASSERT_TRUE(st.ok()) << st.message();
  settle();
  EXPECT_EQ(w.model().spans().size(), counts_.spans + counts_.transfers);
  EXPECT_FALSE(w.viewState().live);
  for (const char* name : {"timelineView", "queuesDockView", "skewDockView", "chartsDockView"}) {
    auto* view = w.findChild<ImGuiWidget*>(name);
    ASSERT_NE(view, nullptr) << name;
    EXPECT_GT(view->framesDrawn(), 0u) << name << " never painted";
  }
  // The timeline shows spans: attention (blue) and expert (green) rows.
  auto* timeline = w.findChild<ImGuiWidget*>("timelineView");
  const QImage frame = timeline->grabFramebuffer();
  const auto colours = count_span_colours(frame);
  EXPECT_GT(colours.blue, 2000);
  EXPECT_GT(colours.green, 2000);

  const QString png = QString::fromStdString(scratch_dir() + "/trace.png");
  ASSERT_TRUE(w.saveScreenshot(png).ok());
  const QImage shot(png);
  ASSERT_FALSE(shot.isNull());
  EXPECT_EQ(shot.size(), w.size() * w.devicePixelRatio());
  EXPECT_GT(luminance_stddev(shot), 10.0);
}

// Before connecting and with a trace open there are no engine values: the controls are
// hidden, not shown greyed with made-up values; the window fits the screen.
TEST_F(ConsoleGui, TheDevicesViewShowsWhereEachDevicesTimeGoes) {
  MainWindow w;
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  ASSERT_TRUE(w.openTrace(QString::fromStdString(trace_)).ok());
  auto* dock = w.findChild<QDockWidget*>("devicesDock");
  ASSERT_NE(dock, nullptr);
  dock->raise();
  settle();
  auto* view = w.findChild<ImGuiWidget*>("devicesDockView");
  ASSERT_NE(view, nullptr);
  const std::uint64_t before = view->framesDrawn();
  EXPECT_GT(before, 0u) << "the Devices view never painted once raised";
  // It draws the table and the rows-per-execution chart: far from a blank pane.
  const QImage frame = view->grabFramebuffer();
  EXPECT_GT(luminance_stddev(frame), 5.0);
}

TEST_F(ConsoleGui, ShowsOnlyWhatIsTrueBeforeConnecting) {
  MainWindow w;
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  const QRect screen = QGuiApplication::primaryScreen()->availableGeometry();
  EXPECT_LE(w.frameGeometry().width(), screen.width());
  EXPECT_LE(w.height(), screen.height());
  EXPECT_GE(w.width(), screen.width() * 8 / 10);
  for (const char* name : {"applyPolicyButton", "decaySpin", "applyMicrobatchesButton", "recordStartButton"}) {
    auto* widget = w.findChild<QWidget*>(name);
    ASSERT_NE(widget, nullptr) << name;
    EXPECT_FALSE(widget->isVisible()) << name << " shows before any engine is connected";
  }
  auto* state = w.findChild<QLabel*>("stateLabel");
  ASSERT_NE(state, nullptr);
  EXPECT_TRUE(state->text().startsWith("not connected")) << state->text().toStdString();

  ASSERT_TRUE(w.openTrace(QString::fromStdString(trace_)).ok());
  settle();
  EXPECT_FALSE(w.findChild<QWidget*>("applyPolicyButton")->isVisible()) << "a trace has nothing to control";
  EXPECT_TRUE(state->text().startsWith("not connected")) << state->text().toStdString();
}

// A window too short for every device row says how many are below instead of hiding them.
TEST_F(ConsoleGui, DeviceRowsOutOfViewAreCounted) {
  MainWindow w;
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  ASSERT_TRUE(w.openTrace(QString::fromStdString(trace_)).ok());
  settle();
  w.resize(w.width(), 360);
  settle();
  const auto& frame = w.timelineView().last_frame();
  EXPECT_GT(frame.rows_below, 0) << "a short window hides device rows, and counts them";
  EXPECT_EQ(frame.rows_above, 0);
  EXPECT_LT(frame.rows_below, w.model().device_count()) << "the first row is in view";
}

TEST_F(ConsoleGui, TheScrubberSetsTheTimeTheViewsShow) {
  MainWindow w;
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  ASSERT_TRUE(w.openTrace(QString::fromStdString(trace_)).ok());
  auto* slider = w.findChild<QSlider*>("scrubber");
  ASSERT_NE(slider, nullptr);
  slider->setFocus();
  QTest::keyClick(slider, Qt::Key_Home);  // the start of the run
  settle(100);
  const std::int64_t begin = w.model().begin_ns(), end = w.model().end_ns();
  EXPECT_GE(w.viewState().cursor_ns, begin);
  EXPECT_LT(w.viewState().cursor_ns, begin + (end - begin) / 100);
  QTest::keyClick(slider, Qt::Key_End);
  settle(100);
  EXPECT_GT(w.viewState().cursor_ns, end - (end - begin) / 100);
}

TEST_F(ConsoleGui, TimelineZoomsAndPansWithKeysAndWheel) {
  MainWindow w;
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  ASSERT_TRUE(w.openTrace(QString::fromStdString(trace_)).ok());
  settle();
  auto* timeline = w.findChild<ImGuiWidget*>("timelineView");
  ASSERT_NE(timeline, nullptr);
  timeline->setFocus();
  // Hover the rows so the view owns the input, then press W: press and release arrive between
  // two frames, and the glue must still show ImGui the press.
  QTest::mouseMove(timeline, QPoint(timeline->width() / 2, timeline->height() / 2));
  settle(150);
  const std::int64_t range0 = w.viewState().view_t1_ns - w.viewState().view_t0_ns;
  QTest::keyClick(timeline, Qt::Key_W);
  settle(150);
  const std::int64_t range1 = w.viewState().view_t1_ns - w.viewState().view_t0_ns;
  EXPECT_LT(range1, range0 * 8 / 10);
  EXPECT_GT(range1, range0 * 6 / 10);

  const std::int64_t t0 = w.viewState().view_t0_ns;
  QTest::keyClick(timeline, Qt::Key_D);
  settle(150);
  EXPECT_GT(w.viewState().view_t0_ns, t0);

  // Wheel towards the user zooms out around the pointer.
  const QPoint at(timeline->width() / 2, timeline->height() / 2);
  QWheelEvent wheel(QPointF(at), QPointF(timeline->mapToGlobal(at)), QPoint(), QPoint(0, -120), Qt::NoButton,
                    Qt::NoModifier, Qt::NoScrollPhase, false);
  QApplication::sendEvent(timeline, &wheel);
  settle(150);
  EXPECT_GT(w.viewState().view_t1_ns - w.viewState().view_t0_ns, range1);

  QTest::keyClick(timeline, Qt::Key_Home);  // fit the run
  settle(150);
  EXPECT_LE(w.viewState().view_t0_ns, w.model().begin_ns());
  EXPECT_GE(w.viewState().view_t1_ns, w.model().end_ns());
}

TEST_F(ConsoleGui, AViewKeepsDrawingWhenItsDockFloatsAndReturns) {
  // Floating a dock gives its GL widget a new context: the glue must rebuild ImGui's GL objects.
  MainWindow w;
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  ASSERT_TRUE(w.openTrace(QString::fromStdString(trace_)).ok());
  auto* dock = w.findChild<QDockWidget*>("skewDock");
  auto* view = w.findChild<ImGuiWidget*>("skewDockView");
  ASSERT_TRUE(dock && view);
  for (bool floating : {true, false}) {
    dock->setFloating(floating);
    settle(300);
    const auto frames = view->framesDrawn();
    view->requestFrames(3);
    settle(300);
    EXPECT_GT(view->framesDrawn(), frames) << (floating ? "floating" : "docked again");
    const QImage image = view->grabFramebuffer();
    EXPECT_GT(luminance_stddev(image), 10.0) << (floating ? "floating" : "docked again");
  }
}

TEST_F(ConsoleGui, ExportsTheOpenTraceAsSqliteAndChromeJson) {
  MainWindow w;
  const QString db = QString::fromStdString(scratch_dir() + "/export.db");
  const QString js = QString::fromStdString(scratch_dir() + "/export.json");
  // Nothing open, nothing connected: a clear refusal.
  const auto none = w.exportSqliteTo(db);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("no trace is open"), std::string::npos) << none.message();

  ASSERT_TRUE(w.openTrace(QString::fromStdString(trace_)).ok());
  ASSERT_TRUE(w.exportSqliteTo(db).ok());
  MainWindow reopened;
  ASSERT_TRUE(reopened.openTrace(db).ok());
  EXPECT_EQ(reopened.model().spans().size(), w.model().spans().size());

  ASSERT_TRUE(w.exportChromeTo(js).ok());
  QFile f(js);
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  const QByteArray text = f.readAll();
  EXPECT_TRUE(text.contains("\"traceEvents\"") || text.startsWith("[")) << text.left(200).toStdString();
  EXPECT_TRUE(text.contains("set_policy"));  // the control command, as an instant event
}

TEST_F(ConsoleGui, ABadTraceIsReportedAndTheWindowCarriesOn) {
  MainWindow w;
  w.show();
  const std::string bogus = scratch_dir() + "/bogus.db";
  { std::ofstream(bogus) << "not sqlite"; }
  const int errors = w.log()->errorCount();
  const auto st = w.openTrace(QString::fromStdString(bogus));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bogus.db"), std::string::npos) << st.message();
  EXPECT_EQ(w.log()->errorCount(), errors + 1);
  ASSERT_TRUE(w.openTrace(QString::fromStdString(trace_)).ok());
}

// A recording too large to load whole (more than TraceDetail::kMaxFullSpans spans) opens by
// its per-second windows: the timeline draws the whole run from them, and zooming in reads the
// spans of the view from the file. SY_LARGE_TRACE names a recording to use instead of the
// synthetic one (e.g. an hour made by `switchyard demo --pace 0 --duration 3600 --record`); the
// time to open is printed, not asserted (docs/console.md#performance has the measurements).
TEST_F(ConsoleGui, ALargeRecordingOpensByItsOverviewAndReadsSpansOnZoom) {
  std::string path;
  if (const char* env = std::getenv("SY_LARGE_TRACE"); env != nullptr && *env != '\0') {
    path = env;
  } else {
    path = scratch_dir() + "/large.db";
    if (!fs::exists(path)) {
      auto counts = testing::write_synthetic_trace(path, 60);  // about 4.4 M spans
      ASSERT_TRUE(counts.ok()) << counts.status().message();
    }
  }
  MainWindow w;
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  const auto opened = testing::open_trace_and_draw(w, path);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  const double open_s = *opened;
  auto* timeline = w.findChild<ImGuiWidget*>("timelineView");
  std::printf("opened %s by its overview in %.2f s\n", path.c_str(), open_s);
  RecordProperty("overview_open_seconds", std::to_string(open_s));
  ASSERT_TRUE(w.model().overview().has_value()) << "opened whole instead of by its overview";
  settle();
  // The whole run in windows: blue attention and green expert blocks across the timeline.
  const auto colours = count_span_colours(timeline->grabFramebuffer());
  EXPECT_GT(colours.blue, 2000);
  EXPECT_GT(colours.green, 2000);

  // Zoom in (W) until the view holds few enough spans to read.
  timeline->setFocus();
  QTest::mouseMove(timeline, QPoint(timeline->width() / 2, timeline->height() / 2));
  settle(150);
  for (int i = 0; i < 40 && w.model().spans().empty(); ++i) {
    QTest::keyClick(timeline, Qt::Key_W);
    settle(150);
  }
  // The zoomed range is read on a thread of its own: in a release build it is in before the
  // zooming ends; a Debug build with sanitizers reads it for tens of seconds more.
  for (int i = 0; i < 600 && w.model().spans().empty(); ++i) settle(100);
  ASSERT_FALSE(w.model().spans().empty()) << "zooming in read no spans";
  const TraceOverview& o = *w.model().overview();
  EXPECT_LE(o.detail_t0_ns, w.viewState().view_t0_ns);
  EXPECT_GE(o.detail_t1_ns, w.viewState().view_t1_ns);
  EXPECT_LT(w.model().spans().size(), static_cast<std::size_t>(o.spans)) << "only the zoomed range is read";
}

// File > Compare with recording: the open recording (A) against another (B), per device.
TEST_F(ConsoleGui, ComparesTheOpenRecordingWithAnother) {
  MainWindow w;
  auto none = w.compareWith(QString::fromStdString(trace_));
  ASSERT_FALSE(none.ok()) << "nothing open, nothing to compare";
  EXPECT_NE(none.status().message().find("nothing to compare"), std::string::npos);
  ASSERT_TRUE(w.openTrace(QString::fromStdString(trace_)).ok());
  auto table = w.compareWith(QString::fromStdString(trace_));
  ASSERT_TRUE(table.ok()) << table.status().message();
  const std::string text = table->toStdString();
  EXPECT_NE(text.find("rows/s A"), std::string::npos) << text;
  EXPECT_NE(text.find("1.00x"), std::string::npos) << text;  // a run against itself
  EXPECT_EQ(text.find("A only"), std::string::npos) << text;
  auto missing = w.compareWith(QString::fromStdString(scratch_dir() + "/none.db"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("none.db"), std::string::npos);
}

TEST_F(ConsoleGui, CommandLineAutomationWritesAScreenshotAndQuits) {
  const QString png = QString::fromStdString(scratch_dir() + "/auto.png");
  QProcess p;
  p.start(SY_CONSOLE_BIN, {"--open", QString::fromStdString(trace_), "--screenshot", png, "--after", "1", "--quit"});
  ASSERT_TRUE(p.waitForFinished(60000)) << "the console did not quit";
  EXPECT_EQ(p.exitStatus(), QProcess::NormalExit);
  EXPECT_EQ(p.exitCode(), 0) << p.readAllStandardError().toStdString();
  const QImage shot(png);
  ASSERT_FALSE(shot.isNull());
  EXPECT_GT(luminance_stddev(shot), 10.0);
  const auto colours = count_span_colours(shot);
  EXPECT_GT(colours.blue, 2000);
  EXPECT_GT(colours.green, 2000);

  QProcess bad;
  bad.start(SY_CONSOLE_BIN, {"--open", "x.db", "--connect", "tcp://127.0.0.1:1"});
  ASSERT_TRUE(bad.waitForFinished(30000));
  EXPECT_EQ(bad.exitCode(), 2);
  EXPECT_TRUE(bad.readAllStandardError().contains("exclude each other"));

  QProcess missing;
  missing.start(SY_CONSOLE_BIN, {"--open", QString::fromStdString(scratch_dir() + "/none.db"), "--screenshot",
                                 png, "--after", "0", "--quit"});
  ASSERT_TRUE(missing.waitForFinished(30000));
  EXPECT_EQ(missing.exitCode(), 1);
  EXPECT_TRUE(missing.readAllStandardError().contains("none.db"));
}

// --help, --version and a mistake need no display: Qt must not start (and abort without one)
// before the command line is read.
TEST(ConsoleCommandLine, HelpVersionAndMistakesNeedNoDisplay) {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  for (const char* name : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(name);
  auto run = [&](const QStringList& args) {
    auto p = std::make_unique<QProcess>();
    p->setProcessEnvironment(env);
    p->start(SY_CONSOLE_BIN, args);
    EXPECT_TRUE(p->waitForFinished(30000)) << args.join(' ').toStdString() << " did not exit";
    EXPECT_EQ(p->exitStatus(), QProcess::NormalExit) << args.join(' ').toStdString() << " crashed";
    return p;
  };
  auto help = run({"--help"});
  EXPECT_EQ(help->exitCode(), 0) << help->readAllStandardError().toStdString();
  const QByteArray help_text = help->readAllStandardOutput();
  EXPECT_TRUE(help_text.contains("--connect")) << help_text.toStdString();
  EXPECT_TRUE(help_text.contains("Usage: switchyard-console")) << help_text.toStdString();
  auto version = run({"--version"});
  EXPECT_EQ(version->exitCode(), 0) << version->readAllStandardError().toStdString();
  EXPECT_TRUE(version->readAllStandardOutput().contains("switchyard-console 0.1.0"));
  auto bad = run({"--bogus"});
  EXPECT_EQ(bad->exitCode(), 2);
  EXPECT_TRUE(bad->readAllStandardError().contains("bogus"));
  auto after = run({"--quit", "--after", "nan"});
  EXPECT_EQ(after->exitCode(), 2);
  EXPECT_TRUE(after->readAllStandardError().contains("--after"));
}

// A NaN, infinite or huge --after once became a timer that never fired: --quit never quit.
TEST(ConsoleCommandLine, AfterTakesFiniteSecondsUpToADay) {
  for (const char* value : {"nan", "inf", "-inf", "3000000", "86400.5", "-1", "soon"}) {
    int code = 0;
    const auto c = parse_command_line({"switchyard-console", "--quit", "--after", value}, code);
    EXPECT_FALSE(c.has_value()) << "--after " << value << " was accepted";
    EXPECT_EQ(code, 2) << value;
  }
  for (const auto& [value, ms] : {std::pair{"0", 0}, std::pair{"1.5", 1500}, std::pair{"86400", 86'400'000}}) {
    int code = 0;
    const auto c = parse_command_line({"switchyard-console", "--quit", "--after", value}, code);
    ASSERT_TRUE(c.has_value()) << "--after " << value << " was refused";
    EXPECT_EQ(after_milliseconds(*c), ms) << value;
  }
}

// --client names a key pair in --keys DIR: without it the console would connect without CURVE.
TEST(ConsoleCommandLine, ClientNeedsKeys) {
  int code = 0;
  EXPECT_FALSE(parse_command_line({"switchyard-console", "--connect", "tcp://127.0.0.1:5555", "--client", "ops"}, code));
  EXPECT_EQ(code, 2);
  const auto c =
      parse_command_line({"switchyard-console", "--connect", "tcp://127.0.0.1:5555", "--keys", "k", "--client", "ops"}, code);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->connect->client_name, "ops");
}

TEST(TimelineLayout, TheLegendNamesEveryKindDrawnInItsOwnColour) {
  const auto kinds = TimelineView::legend_kinds();
  const std::set<telemetry::SpanKind> named(kinds.begin(), kinds.end());
  for (std::size_t i = 0; i < telemetry::kSpanKinds; ++i) {
    const auto k = static_cast<telemetry::SpanKind>(i);
    if (k == telemetry::SpanKind::Stall) continue;  // named by reason instead
    EXPECT_EQ(named.count(k), 1u) << telemetry::span_kind_name(k) << " is missing from the legend";
  }
}

TEST(TimelineLayout, ControlMarkerLabelsNeverOverlap) {
  using Box = TimelineView::LabelBox;
  // Three markers a few pixels apart, a fourth far right, a fifth close to it.
  const std::vector<Box> labels = {{100, 200}, {110, 150}, {120, 90}, {600, 100}, {650, 100}};
  const std::vector<int> rows = TimelineView::marker_label_rows(labels, 2, 8);
  ASSERT_EQ(rows.size(), labels.size());
  EXPECT_EQ(rows[0], 0);
  EXPECT_EQ(rows[1], 1);
  EXPECT_EQ(rows[2], -1) << "no third row: left out, not drawn over the others";
  EXPECT_EQ(rows[3], 0) << "far enough right to reuse the top row";
  EXPECT_EQ(rows[4], 1);
  for (std::size_t i = 0; i < labels.size(); ++i)
    for (std::size_t j = i + 1; j < labels.size(); ++j)
      if (rows[i] >= 0 && rows[i] == rows[j]) {
        const Box& a = labels[i].left < labels[j].left ? labels[i] : labels[j];
        const Box& b = labels[i].left < labels[j].left ? labels[j] : labels[i];
        EXPECT_LE(a.left + a.width + 8, b.left) << "labels " << i << " and " << j << " overlap";
      }
  // Order of the markers does not matter (events arrive as the engine applies them).
  const std::vector<Box> reversed(labels.rbegin(), labels.rend());
  const std::vector<int> rows_reversed = TimelineView::marker_label_rows(reversed, 2, 8);
  for (std::size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(rows_reversed[labels.size() - 1 - i], rows[i]) << i;
  EXPECT_EQ(TimelineView::marker_label_rows(labels, 0, 8), std::vector<int>(labels.size(), -1));
}

}  // namespace
}  // namespace sy::console
