// End to end under Xvfb: the demo engine (`switchyard demo --telemetry --control`) streams a
// simulated 8-GPU cluster; the console shows its timeline, queues and expert load live; a policy
// change made with the console's own widgets takes effect in the engine (checked with a separate
// ControlClient) and appears in the stream; the screenshot is not blank; a recording started and
// stopped from the console opens as a trace with the same views.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QComboBox>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QTest>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "console/app/log_panel.h"
#include "console/app/main_window.h"
#include "console/imgui_glue/imgui_widget.h"
#include "gui_environment.h"
#include "telemetry/control_client.h"
#include "tests/support/free_port.h"

namespace sy::console {
namespace {

using nlohmann::json;

using test::free_port;

template <class F>
bool wait_for(F done, int seconds = 30) {
  for (int i = 0; i < seconds * 20; ++i) {
    if (done()) return true;
    QTest::qWait(50);
  }
  return done();
}

// Selects `text` in a combo box the way an operator does: once it is on screen (the control panel
// shows its live widgets only after its first look at the run's metadata, which sets them to the
// engine's values), focus it and step with the arrow keys.
void choose(QComboBox* combo, const QString& text) {
  ASSERT_TRUE(wait_for([&] { return combo->isVisible(); })) << combo->objectName().toStdString() << " never showed";
  combo->setFocus();
  const int target = combo->findText(text);
  ASSERT_GE(target, 0) << text.toStdString();
  while (combo->currentIndex() < target) QTest::keyClick(combo, Qt::Key_Down);
  while (combo->currentIndex() > target) QTest::keyClick(combo, Qt::Key_Up);
  ASSERT_EQ(combo->currentText(), text);
}

class ConsoleEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(testing::gui_application(), nullptr);
    telemetry_ = "tcp://127.0.0.1:" + std::to_string(free_port());
    control_ = "tcp://127.0.0.1:" + std::to_string(free_port());
    engine_.setProcessChannelMode(QProcess::MergedChannels);
    engine_.start(SY_SWITCHYARD_BIN, {"demo", "--no-console", "--duration", "40", "--telemetry", QString::fromStdString(telemetry_),
                                      "--control", QString::fromStdString(control_), "--record-dir",
                                      QString::fromStdString(testing::scratch_dir())});
    ASSERT_TRUE(engine_.waitForStarted(10000));
  }
  void TearDown() override {
    engine_.terminate();
    if (!engine_.waitForFinished(5000)) engine_.kill();
    engine_.waitForFinished(5000);
  }
  std::string engine_output() { return engine_.readAll().toStdString(); }

  // The engine's state as another client sees it.
  json engine_state() {
    auto client = telemetry::ControlClient::connect(control_);
    EXPECT_TRUE(client.ok()) << client.status().message();
    if (!client.ok()) return {};
    auto reply = (*client)->call(R"({"cmd":"get_state"})", std::chrono::milliseconds(5000));
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    if (!reply.ok()) return {};
    return json::parse(*reply, nullptr, false);
  }

  std::string telemetry_, control_;
  QProcess engine_;
};

TEST_F(ConsoleEndToEnd, WatchSteerRecordAndReopen) {
  MainWindow w;
  w.show();
  ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
  ConnectionSettings settings;
  settings.telemetry_endpoint = telemetry_;
  settings.control_endpoint = control_;
  ASSERT_TRUE(w.connectTo(settings).ok());

  // Live: timeline, queues and expert load all receive data.
  wait_for([&] {
    return engine_.state() != QProcess::Running ||
           (w.model().meta().has_value() && w.model().spans().size() > 1000 && w.model().queues().queue_count() > 0 &&
            w.model().loads().latest() != nullptr);
  });
  ASSERT_EQ(engine_.state(), QProcess::Running) << "the engine exited; it said:\n" << engine_output();
  ASSERT_TRUE(w.model().meta().has_value() && w.model().spans().size() > 1000 && w.model().queues().queue_count() > 0 &&
              w.model().loads().latest() != nullptr)
      << "no live data; engine said:\n" << engine_output() << "\nconsole log:\n" << w.log()->toPlainText().toStdString();
  const auto& meta = *w.model().meta();
  EXPECT_GE(meta.devices.size(), 8u);
  const std::string before = meta.policy.name + "/" + meta.policy.scheduler;

  // Change the policy with the control panel's widgets: async/defrag -> async/mtfs (or back).
  auto* policy = w.findChild<QComboBox*>("policyCombo");
  auto* scheduler = w.findChild<QComboBox*>("schedulerCombo");
  auto* apply = w.findChild<QPushButton*>("applyPolicyButton");
  ASSERT_TRUE(policy && scheduler && apply);
  choose(policy, "async");
  const QString target = meta.policy.scheduler == "mtfs" ? "defrag" : "mtfs";
  choose(scheduler, target);
  ASSERT_TRUE(apply->isEnabled());
  ASSERT_TRUE(testing::click_when_settled(apply));
  ASSERT_TRUE(wait_for([&] { return w.log()->toPlainText().contains("set policy async/" + target + ": "); }))
      << w.log()->toPlainText().toStdString();
  EXPECT_FALSE(w.log()->toPlainText().contains("refused")) << w.log()->toPlainText().toStdString();

  // The engine changed: ask it directly.
  const json state = engine_state();
  ASSERT_TRUE(state.is_object() && state.value("ok", false)) << state.dump();
  EXPECT_EQ(state["state"]["policy"]["name"], "async");
  EXPECT_EQ(state["state"]["policy"]["scheduler"], target.toStdString()) << "before: " << before;

  // ... and the stream says so: a control event (the timeline's marker) and the new metadata.
  ASSERT_TRUE(wait_for([&] {
    for (const auto& e : w.model().control_events())
      if (e.cmd == "set_policy" && e.ok) return w.model().meta()->policy.scheduler == target.toStdString();
    return false;
  })) << "the policy change did not show in the stream";

  // The screenshot shows the live cluster (with a couple of seconds of it in the views).
  const std::int64_t shown_from = w.model().end_ns();
  ASSERT_TRUE(wait_for([&] { return w.model().end_ns() > shown_from + 2'000'000'000; }));
  const QString png = QString::fromStdString(testing::scratch_dir() + "/live.png");
  ASSERT_TRUE(w.saveScreenshot(png).ok());
  const QImage shot(png);
  ASSERT_FALSE(shot.isNull());
  EXPECT_GT(testing::luminance_stddev(shot), 10.0);
  const auto colours = testing::count_span_colours(w.findChild<ImGuiWidget*>("timelineView")->grabFramebuffer());
  EXPECT_GT(colours.saturated, 20000);

  // Record a second of the run from the console, then open the recording post-mortem.
  const std::string db = testing::scratch_dir() + "/e2e-run.db";
  std::filesystem::remove(db);
  w.findChild<QLineEdit*>("recordPathEdit")->setText("e2e-run.db");  // in the engine's --record-dir
  ASSERT_TRUE(testing::click_when_settled(w.findChild<QPushButton*>("recordStartButton")));
  ASSERT_TRUE(wait_for([&] { return w.model().meta()->recording_path.has_value(); }))
      << w.log()->toPlainText().toStdString();
  QTest::qWait(1500);
  ASSERT_TRUE(testing::click_when_settled(w.findChild<QPushButton*>("recordStopButton")));
  ASSERT_TRUE(wait_for([&] { return !w.model().meta()->recording_path.has_value(); }));
  ASSERT_TRUE(std::filesystem::exists(db));

  const auto st = w.openTrace(QString::fromStdString(db));
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_GT(w.model().spans().size(), 100u);
  EXPECT_GT(w.model().queues().queue_count(), 0u);
  EXPECT_TRUE(w.model().meta().has_value());
  QTest::qWait(300);
  const auto trace_colours = testing::count_span_colours(w.findChild<ImGuiWidget*>("timelineView")->grabFramebuffer());
  EXPECT_GT(trace_colours.saturated, 20000);
}

}  // namespace
}  // namespace sy::console
