// The console's live path against the telemetry library's real publisher and control server
// (the engine's own parts, driven here by the test instead of the runtime): the stream fills the
// views, an engine restart (new run id) clears them, commands made with the control panel's
// widgets arrive as documented and every reply, an error too, is shown.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QTest>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "console/app/live_connection.h"
#include "console/app/log_panel.h"
#include "console/app/main_window.h"
#include "gui_environment.h"
#include "telemetry/control_server.h"
#include "telemetry/curve_keys.h"
#include "telemetry/curve_server.h"
#include "telemetry/telemetry_hub.h"

namespace sy::console {
namespace {

using nlohmann::json;

constexpr const char* kMeta = R"({"schema_version":1,"run_id":0,"clock":"virtual","now_ns":0,"backend":"sim",
  "model":{"name":"live-test","arch":"mixtral","blocks":2,"experts":4,"top_k":2,"hidden_size":64},
  "devices":[{"index":0,"name":"a0","rank":0,"node":0},{"index":1,"name":"e0","rank":-1,"node":0},
             {"index":2,"name":"e1","rank":-1,"node":0}],
  "placement":[[[1],[1],[2],[2]],[[1],[1],[2],[2]]],
  "policy":{"name":"async","scheduler":"defrag","lookahead":3,"decay":0.5,"microbatches":2},
  "admission_paused":false,"recording":null,"workload":null,"row_bytes":128})";

// Waits (running the event loop) until `done` holds or ~20 s pass.
template <class F>
bool wait_for(F done) {
  for (int i = 0; i < 400; ++i) {
    if (done()) return true;
    QTest::qWait(50);
  }
  return done();
}

class ConsoleLive : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(testing::gui_application(), nullptr);
    start_servers();
  }

  void start_servers() {
    server_.reset();
    hub_.reset();
    start_hub(0);
    telemetry::ControlServerOptions options;
    options.endpoint = "tcp://127.0.0.1:0";
    options.curve = curve_;
    auto server = telemetry::ControlServer::start(options, [this](json command, telemetry::ControlServer::Reply reply) {
      {
        std::lock_guard lock(mutex_);
        commands_.push_back(command);
      }
      const std::string cmd = command["cmd"];
      if (cmd == "get_state") reply({{"ok", true}, {"state", state()}});
      else if (cmd == "set_microbatches") reply.error("set_microbatches needs a grouped policy (pingpong), not async");
      else reply({{"ok", true}});
    });
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
  }

  void start_hub(std::uint64_t run_id) {
    telemetry::HubOptions options;
    options.endpoint = hub_endpoint_.empty() ? "tcp://127.0.0.1:0" : hub_endpoint_;
    options.run_id = run_id;
    options.curve = curve_;
    hub_.reset();
    auto hub = telemetry::TelemetryHub::start(options);
    ASSERT_TRUE(hub.ok()) << hub.status().message();
    hub_ = std::move(*hub);
    hub_endpoint_ = hub_->endpoint();
    producer_ = &hub_->add_producer("test");
  }

  // One burst of every topic, as an engine publishes about once per window.
  void publish(std::int64_t t) {
    json meta = json::parse(kMeta);
    meta["run_id"] = hub_->run_id();
    meta["now_ns"] = t;
    ASSERT_TRUE(hub_->publish_json(telemetry::Topic::Meta, meta.dump()).ok());
    for (int d = 0; d < 3; ++d) {
      telemetry::Span s;
      s.device = d;
      s.kind = d == 0 ? telemetry::SpanKind::Attention : telemetry::SpanKind::Expert;
      s.start_ns = t;
      s.end_ns = t + 500'000;
      s.tokens = 32;
      producer_->span(s);
      telemetry::QueueSample q;
      q.t_ns = t;
      q.device = d;
      q.depth_tokens = 10 + d;
      q.layer = d == 0 ? telemetry::LayerKind::Attention : telemetry::LayerKind::Expert;
      producer_->queue(q);
    }
    telemetry::ExpertLoad l;
    l.window_start_ns = t - 1'000'000'000;
    l.window_end_ns = t;
    l.device = 1;
    l.tokens = 100;
    producer_->load(l);
    hub_->flush();
  }

  std::vector<json> commands() {
    std::lock_guard lock(mutex_);
    return commands_;
  }

  // The engine state get_state answers with.
  json state() {
    std::lock_guard lock(mutex_);
    return state_;
  }
  void set_state_policy(const std::string& key, const json& value) {
    std::lock_guard lock(mutex_);
    state_["policy"][key] = value;
  }

  ConnectionSettings settings() const {
    ConnectionSettings s;
    s.telemetry_endpoint = hub_endpoint_;
    s.control_endpoint = server_->endpoint();
    return s;
  }

  std::optional<telemetry::CurveServerConfig> curve_;
  std::string hub_endpoint_;
  std::unique_ptr<telemetry::TelemetryHub> hub_;
  telemetry::Producer* producer_ = nullptr;
  std::unique_ptr<telemetry::ControlServer> server_;
  std::mutex mutex_;
  std::vector<json> commands_;
  json state_ = json::parse(kMeta);
};

TEST_F(ConsoleLive, StreamFillsTheViewsAndARestartClearsThem) {
  MainWindow w;
  w.show();
  ASSERT_TRUE(w.connectTo(settings()).ok());
  const std::uint64_t first_run = hub_->run_id();
  std::int64_t t = 1'000'000'000;
  ASSERT_TRUE(wait_for([&] {
    publish(t += 1'000'000);
    return w.model().spans().size() >= 3 && w.model().meta().has_value();
  }));
  EXPECT_EQ(w.model().meta()->model_name, "live-test");
  EXPECT_EQ(w.model().queues().queue_count(), 3u);
  EXPECT_EQ(w.connection().runId(), first_run);
  EXPECT_EQ(w.connection().state(), LiveConnection::State::Connected);
  EXPECT_TRUE(wait_for([&] { return w.findChild<QLabel*>("connectionLabel")->text().contains("connected"); }));
  // The control panel took the engine's state.
  EXPECT_EQ(w.findChild<QComboBox*>("policyCombo")->currentText(), "async");

  // The engine restarts on the same endpoint with a new run: the console clears the old run's
  // data, and fills again from the new one without being told to reconnect.
  ASSERT_TRUE(wait_for([&] {
    publish(t += 1'000'000);
    return w.model().spans().size() >= 9;
  }));
  start_hub(first_run + 1);
  t = 5'000'000;
  ASSERT_TRUE(wait_for([&] {
    publish(t += 1'000'000);
    // The new run's metadata is in the model (taken after the clear), and its spans.
    return w.model().meta().has_value() && w.model().meta()->run_id == first_run + 1 &&
           w.model().spans().size() >= 3;
  }));
  EXPECT_EQ(w.connection().runId(), first_run + 1);
  // The old run's data (times from 1 s on) is gone; the new run's starts near 0.
  EXPECT_LT(w.model().end_ns(), 1'000'000'000);
  EXPECT_LT(w.model().spans().end_ns(), 1'000'000'000);
  EXPECT_TRUE(w.log()->toPlainText().contains("engine restarted"));
}

TEST_F(ConsoleLive, PolicyWidgetsSendTheDocumentedCommandAndRepliesAreShown) {
  MainWindow w;
  w.show();
  ASSERT_TRUE(w.connectTo(settings()).ok());
  ASSERT_TRUE(wait_for([&] { return w.model().meta().has_value(); }));  // from get_state's reply

  auto* policy = w.findChild<QComboBox*>("policyCombo");
  auto* scheduler = w.findChild<QComboBox*>("schedulerCombo");
  auto* apply = w.findChild<QPushButton*>("applyPolicyButton");
  ASSERT_TRUE(policy && scheduler && apply);
  // The controls appear once the panel has taken the engine's values (at its next refresh).
  ASSERT_TRUE(wait_for([&] { return apply->isVisible(); }));
  ASSERT_TRUE(apply->isEnabled());
  scheduler->setFocus();
  QTest::keyClick(scheduler, Qt::Key_Down);  // defrag -> mtfs
  ASSERT_EQ(scheduler->currentText(), "mtfs");
  ASSERT_TRUE(testing::click_when_settled(apply));
  ASSERT_TRUE(wait_for([&] { return commands().size() >= 2; }));
  const json sent = commands().back();
  EXPECT_EQ(sent["cmd"], "set_policy");
  EXPECT_EQ(sent["policy"], "async");
  EXPECT_EQ(sent["params"]["scheduler"], "mtfs");
  EXPECT_EQ(sent["params"]["lookahead"], 3);
  ASSERT_TRUE(wait_for([&] { return w.findChild<QLabel*>("replyLabel")->text().contains("ok"); }));

  // findep's r2 and shared-expert order: enabled for findep only, sent with set_policy.
  auto* chunks = w.findChild<QSpinBox*>("expertChunksSpin");
  auto* order = w.findChild<QComboBox*>("orderCombo");
  ASSERT_TRUE(chunks && order);
  EXPECT_FALSE(chunks->isEnabled());
  EXPECT_FALSE(order->isEnabled());
  policy->setCurrentIndex(policy->findText("findep"));
  EXPECT_TRUE(chunks->isEnabled());
  EXPECT_TRUE(order->isEnabled());
  chunks->setValue(3);
  order->setCurrentIndex(order->findText("aass"));
  const auto before = commands().size();
  ASSERT_TRUE(testing::click_when_settled(apply));
  ASSERT_TRUE(wait_for([&] { return commands().size() > before; }));
  const json findep = commands().back();
  EXPECT_EQ(findep["cmd"], "set_policy");
  EXPECT_EQ(findep["policy"], "findep");
  EXPECT_EQ(findep["params"]["expert_chunks"], 3);
  EXPECT_EQ(findep["params"]["order"], "aass");

  // An error reply is shown in the log (red) and the status bar, with the engine's message.
  const int errors = w.log()->errorCount();
  ASSERT_TRUE(testing::click_when_settled(w.findChild<QPushButton*>("applyMicrobatchesButton")));
  ASSERT_TRUE(wait_for([&] { return w.log()->errorCount() > errors; }));
  EXPECT_TRUE(w.log()->toPlainText().contains("needs a grouped policy"));
  EXPECT_TRUE(w.findChild<QLabel*>("replyLabel")->text().contains("refused"));

  // The placement editor sends move_expert for what its widgets say.
  w.findChild<QSpinBox*>("placementBlockSpin")->setValue(1);
  w.findChild<QSpinBox*>("placementExpertSpin")->setValue(2);
  w.findChild<QComboBox*>("placementFromCombo")->setCurrentIndex(2);  // e1
  w.findChild<QComboBox*>("placementToCombo")->setCurrentIndex(1);    // e0
  ASSERT_TRUE(testing::click_when_settled(w.findChild<QPushButton*>("applyPlacementButton")));
  ASSERT_TRUE(wait_for([&] { return commands().back()["cmd"] == "move_expert"; }));
  EXPECT_EQ(commands().back(), json::parse(R"({"cmd":"move_expert","block":1,"expert":2,"from":2,"to":1})"));
}

// The lookahead field holds what the engine accepts (0-1024): an engine at 100 shows 100 and
// Apply sends 100, not a clamped 64; an engine at 0 shows 0, not the field's older value.
TEST_F(ConsoleLive, PolicyFieldsHoldTheEnginesWholeRange) {
  for (int lookahead : {100, 0, 1024}) {
    set_state_policy("lookahead", lookahead);
    MainWindow w;
    w.show();
    ASSERT_TRUE(w.connectTo(settings()).ok());
    auto* apply = w.findChild<QPushButton*>("applyPolicyButton");
    auto* spin = w.findChild<QSpinBox*>("lookaheadSpin");
    ASSERT_TRUE(apply && spin);
    ASSERT_TRUE(wait_for([&] { return apply->isVisible(); }));
    EXPECT_EQ(spin->value(), lookahead);
    const auto before = commands().size();
    ASSERT_TRUE(testing::click_when_settled(apply));
    ASSERT_TRUE(wait_for([&] { return commands().size() > before; }));
    EXPECT_EQ(commands().back()["cmd"], "set_policy");
    EXPECT_EQ(commands().back()["params"]["lookahead"], lookahead);
  }
  // decay is in (0, 1] for the engine: the field cannot send 0.
  MainWindow w;
  auto* decay = w.findChild<QDoubleSpinBox*>("decaySpin");
  ASSERT_NE(decay, nullptr);
  EXPECT_GT(decay->minimum(), 0.0);
  EXPECT_EQ(decay->maximum(), 1.0);
}

// Disconnecting (also quitting, connecting elsewhere, opening a trace) does not wait for a
// command nobody answers: its reply would belong to a connection that is gone.
TEST_F(ConsoleLive, StoppingDoesNotWaitForACommandInFlight) {
  LiveConnection c;
  ConnectionSettings s;
  s.telemetry_endpoint = "tcp://127.0.0.1:1";  // nothing listens: the command waits for its timeout
  s.control_endpoint = "tcp://127.0.0.1:1";
  ASSERT_TRUE(c.start(s).ok());
  // Replies come as queued signals, as to the main window.
  std::vector<std::pair<bool, QString>> replies;
  QObject::connect(&c, &LiveConnection::controlReply, &c,
                   [&](quint64, QString, QString, bool ok, QString reply) { replies.emplace_back(ok, reply); });
  c.sendCommand(R"({"cmd":"get_state"})", "get state");
  QTest::qWait(300);  // the control thread has sent it and polls for the reply
  c.stop();
  EXPECT_FALSE(c.running());
  QTest::qWait(100);  // delivers anything stop() let through
  // Before, stop() joined the control thread only after the 5 s timeout, which it reported.
  EXPECT_TRUE(replies.empty()) << "stop() waited for the command's timeout: " << replies.front().second.toStdString();
  // The connection starts again afterwards, and a command then gets its reply.
  replies.clear();
  ASSERT_TRUE(c.start(settings()).ok());
  c.sendCommand(R"({"cmd":"get_state"})", "get state");
  ASSERT_TRUE(wait_for([&] { return !replies.empty(); }));
  EXPECT_TRUE(replies.front().first) << replies.front().second.toStdString();
}

TEST_F(ConsoleLive, CurveKeysFromAKeyDirectoryAdmitTheConsoleAndNoKeysGetNothing) {
  // A key directory as `switchyard keys` writes it: the engine's pair, a client pair, the client
  // authorised.
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(testing::scratch_dir()) / "keys";
  fs::create_directories(dir / telemetry::kAuthorizedClientsDir);
  const auto server = telemetry::generate_curve_keypair();
  const auto client = telemetry::generate_curve_keypair();
  ASSERT_TRUE(telemetry::write_key_file(dir / telemetry::kServerKeyFile, server, true).ok());
  ASSERT_TRUE(telemetry::write_key_file(dir / telemetry::kServerPublicFile, server, false).ok());
  ASSERT_TRUE(telemetry::write_key_file(dir / "console.key", client, true).ok());
  ASSERT_TRUE(telemetry::write_key_file(dir / telemetry::kAuthorizedClientsDir / "console.pub", client, false).ok());
  auto config = telemetry::load_curve_server_config(dir);
  ASSERT_TRUE(config.ok()) << config.status().message();
  curve_ = *config;
  start_servers();

  MainWindow keyed;
  keyed.show();
  ConnectionSettings with_keys = settings();
  with_keys.key_dir = dir.string();
  with_keys.client_name = "console";
  ASSERT_TRUE(keyed.connectTo(with_keys).ok());
  MainWindow plain;
  plain.show();
  ASSERT_TRUE(plain.connectTo(settings()).ok());

  std::int64_t t = 1'000'000'000;
  ASSERT_TRUE(wait_for([&] {
    publish(t += 1'000'000);
    return keyed.model().spans().size() >= 3 && keyed.model().meta().has_value();
  }));
  // The console without keys saw nothing, and its get_state went unanswered.
  ASSERT_TRUE(wait_for([&] { return plain.log()->errorCount() > 0; }));
  EXPECT_TRUE(plain.model().spans().empty());
  EXPECT_EQ(plain.connection().state(), LiveConnection::State::Waiting);
  EXPECT_TRUE(plain.log()->toPlainText().contains("no reply"));

  // A missing client key is named.
  ConnectionSettings wrong = with_keys;
  wrong.client_name = "nobody";
  const auto st = plain.connectTo(wrong);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nobody.key"), std::string::npos) << st.message();
}

TEST_F(ConsoleLive, NoEngineMeansWaitingAndCommandsTimeOutVisibly) {
  MainWindow w;
  w.show();
  ConnectionSettings s;
  s.telemetry_endpoint = "tcp://127.0.0.1:1";  // nothing listens there
  s.control_endpoint = "tcp://127.0.0.1:1";
  ASSERT_TRUE(w.connectTo(s).ok());  // ZeroMQ connects lazily: not an error
  QTest::qWait(200);
  EXPECT_EQ(w.connection().state(), LiveConnection::State::Waiting);
  // get_state, sent on connect, gets no reply: after the timeout it is an error in the log.
  ASSERT_TRUE(wait_for([&] { return w.log()->errorCount() > 0; }));
  EXPECT_TRUE(w.log()->toPlainText().contains("no reply"));

  ConnectionSettings bad;
  bad.telemetry_endpoint = "not an endpoint";
  const auto st = w.connectTo(bad);
  ASSERT_FALSE(st.ok());
  const std::string m = st.message();
  EXPECT_NE(m.find("telemetry endpoint 'not an endpoint'"), std::string::npos) << m;
  EXPECT_EQ(m.find("not an endpoint"), m.rfind("not an endpoint")) << "the endpoint is named twice: " << m;
  bad = s;
  bad.control_endpoint = "bogus";
  const auto control = w.connectTo(bad);
  ASSERT_FALSE(control.ok());
  EXPECT_NE(control.message().find("control endpoint 'bogus'"), std::string::npos) << control.message();
  EXPECT_EQ(control.message().find("bogus"), control.message().rfind("bogus")) << control.message();
}

}  // namespace
}  // namespace sy::console
