// The `rebalance` and `set_rebalance` control commands on a running simulated deployment with
// skewed routing: a previewed proposal applied exactly as shown at a safe point, the periodic
// rebalancer acting on its own, every applied change a control event (stream and recorded
// trace) with its predicted loads, and no token lost on the way.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>

#include "engine/model/random_model.h"
#include "engine/serving/control_commands.h"
#include "engine/serving/telemetry_bridge.h"
#include "engine/sim/sim_deployment.h"
#include "telemetry/telemetry_hub.h"
#include "telemetry/trace_reader.h"

namespace sy {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class RebalanceCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto hw = find_hardware_profile("h100");
    ASSERT_TRUE(hw.ok()) << hw.status().message();
    config_ = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::BF16);
    config_.num_layers = 4;
    config_.sparse_layers.assign(4, true);
    config_.num_experts = 8;
    config_.top_k = 2;
    DeploymentOptions o;
    o.skew_lambda = 0.5;
    o.link = profile_links(*hw, 8);
    o.coordinator.max_batch_per_rank = 64;
    deployment_ = std::make_unique<SimDeployment>(config_, *hw, Topology::disaggregated(config_, 2, 4), o);
    initial_ = deployment_->cluster().topology().placement;
    telemetry::HubOptions ho;
    ho.endpoint = "tcp://127.0.0.1:0";
    auto hub = telemetry::TelemetryHub::start(ho);
    ASSERT_TRUE(hub.ok()) << hub.status().message();
    hub_ = std::move(hub).value();
    RunInfo info;
    info.backend = "sim";
    info.hardware = "H100";
    info.model_name = "tiny";
    info.model = config_;
    TelemetryBridge::Options bo;
    bo.summary_window_ns = 100'000'000;  // load windows close every 100 ms of run time
    bridge_ = std::make_unique<TelemetryBridge>(*deployment_, *hub_, nullptr, info, bo);
    commands_ = std::make_unique<ControlCommands>(*deployment_, *bridge_, *hub_, ControlCommands::Hooks{});
    trace_ = fs::temp_directory_path() / ("sy_test_rebalance_" + std::to_string(::getpid()) + ".db");
    fs::remove(trace_);
    telemetry::RecorderOptions ro;
    ro.path = trace_;
    ro.metadata = bridge_->recording_metadata();
    ro.device_names = deployment_->cluster().topology().device_names;
    ASSERT_TRUE(hub_->start_recording(ro).ok());

    WorkloadSpec w;
    w.length_class = LengthClass::Short;
    w.rate_per_s = 300;
    w.duration_s = 0.6;
    w.seed = 11;
    w.vocab_size = config_.vocab_size;
    requests_ = generate_workload(w);
    deployment_->submit(requests_);
  }
  void TearDown() override { fs::remove(trace_); }

  json now(const json& command) {
    json reply;
    commands_->handle(command, [&](const json& r) { reply = r; });
    return reply;
  }
  // Runs `make()`'s command on the loop at run time `at_ns`; the reply lands in replies_[tag].
  void at(std::int64_t at_ns, const std::string& tag, std::function<json()> make) {
    deployment_->loop().post(at_ns, [this, tag, make] {
      commands_->handle(make(), [this, tag](const json& r) { replies_[tag] = r; });
    });
  }
  void run_and_check_every_token() {
    deployment_->run();
    const auto& records = deployment_->coordinator().requests();
    ASSERT_EQ(records.size(), requests_.size());
    for (std::size_t i = 0; i < records.size(); ++i) {
      ASSERT_EQ(records[i].state, RequestState::Finished) << "request " << i;
      ASSERT_EQ(static_cast<std::int32_t>(records[i].output.size()), requests_[i].max_new_tokens) << "request " << i;
    }
    EXPECT_TRUE(deployment_->cluster().quiescent());
  }
  // The recorded control events named `cmd`.
  std::vector<json> recorded(const std::string& cmd) {
    bridge_->finish();
    EXPECT_TRUE(hub_->stop_recording().ok());
    auto reader = telemetry::TraceReader::open(trace_);
    EXPECT_TRUE(reader.ok()) << reader.status().message();
    std::vector<json> out;
    if (!reader.ok()) return out;
    auto events = (*reader)->control_events();
    EXPECT_TRUE(events.ok());
    if (!events.ok()) return out;
    for (const std::string& text : *events) {
      json e = json::parse(text);
      if (e["cmd"] == cmd) out.push_back(std::move(e));
    }
    return out;
  }

  ModelConfig config_;
  Placement initial_;
  std::unique_ptr<SimDeployment> deployment_;
  std::unique_ptr<telemetry::TelemetryHub> hub_;
  std::unique_ptr<TelemetryBridge> bridge_;
  std::unique_ptr<ControlCommands> commands_;
  fs::path trace_;
  std::vector<RequestSpec> requests_;
  std::map<std::string, json> replies_;
};

TEST_F(RebalanceCommandsTest, APreviewedProposalIsAppliedAsShownAtASafePoint) {
  at(300'000'000, "preview", [] { return json{{"cmd", "rebalance"}, {"algorithm", "eplb"}}; });
  at(310'000'000, "apply", [this] {
    return json{{"cmd", "rebalance"}, {"apply", true}, {"proposal", replies_["preview"]["proposal"]["id"]}};
  });
  run_and_check_every_token();
  const json& preview = replies_["preview"];
  ASSERT_TRUE(preview["ok"].get<bool>()) << preview.dump();
  EXPECT_FALSE(preview["applied"].get<bool>());
  const json& p = preview["proposal"];
  EXPECT_EQ(p["algorithm"], "eplb");
  EXPECT_EQ(p["slots"], 3);  // two experts per expert device now, one redundant slot each
  ASSERT_EQ(p["load_before"].size(), 6u);
  EXPECT_EQ(p["load_before"][0], 0.0);  // attention devices hold no experts
  EXPECT_GT(p["imbalance_before"].get<double>(), p["imbalance_after"].get<double>());
  EXPECT_GT(p["gain"].get<double>(), 0.0);
  EXPECT_EQ(p["replicas_after"], 4 * 4 * 3);  // EPLB fills every slot
  EXPECT_FALSE(p["changes"].empty());

  const json& applied = replies_["apply"];
  ASSERT_TRUE(applied["ok"].get<bool>()) << applied.dump();
  EXPECT_TRUE(applied["applied"].get<bool>());
  // EPLB moves experts: their weights are copied first, so the apply is answered as pending.
  EXPECT_EQ(applied["pending"], true) << applied.dump();
  EXPECT_FALSE(applied["copies"].empty());
  auto expected = Placement::from_json(p["placement"], config_.num_experts, config_.sparse_layers);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(deployment_->cluster().topology().placement, *expected);
  EXPECT_EQ(applied["new"]["load"], p["load_after"]);

  // A second apply of the same id is refused, saying why: a preview is applied once.
  EXPECT_NE(now({{"cmd", "rebalance"}, {"apply", true}, {"proposal", p["id"]}})["error"].get<std::string>().find(
                "was applied already"),
            std::string::npos);

  const std::vector<json> events = recorded("rebalance");
  // The apply (copying, then switched in), and the refused second apply.
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["phase"], "copying");
  EXPECT_EQ(events[1]["phase"], "applied");
  EXPECT_GE(events[1]["applied_at_ns"].get<std::int64_t>(), 310'000'000);
  for (const json& e : {events[0], events[1]}) {
    EXPECT_TRUE(e["ok"].get<bool>());
    EXPECT_EQ(e["new"]["load"], p["load_after"]);
    EXPECT_EQ(e["old"]["load"], p["load_before"]);
    EXPECT_EQ(e["new"]["imbalance"], p["imbalance_after"]);
  }
  EXPECT_FALSE(events[2]["ok"].get<bool>());
}

TEST_F(RebalanceCommandsTest, ThePeriodicRebalancerAppliesGreedyProposalsByItself) {
  const json set = now({{"cmd", "set_rebalance"}, {"mode", "periodic"}, {"interval_s", 0.2}, {"threshold", 1.05},
                        {"algorithm", "greedy"}});
  ASSERT_TRUE(set["ok"].get<bool>()) << set.dump();
  EXPECT_TRUE(set["old"].is_null());
  EXPECT_EQ(now({{"cmd", "get_state"}})["state"]["rebalance"]["interval_s"], 0.2);
  run_and_check_every_token();
  const Placement& after = deployment_->cluster().topology().placement;
  EXPECT_NE(after, initial_);
  for (std::int32_t b = 0; b < config_.num_layers; ++b)
    for (std::int32_t e = 0; e < config_.num_experts; ++e)
      for (std::int32_t d : initial_.devices(b, e)) {
        EXPECT_TRUE(after.holds(b, e, d));  // greedy only adds
      }

  const json off = now({{"cmd", "set_rebalance"}, {"mode", "off"}});
  ASSERT_TRUE(off["ok"].get<bool>()) << off.dump();
  EXPECT_EQ(off["old"]["algorithm"], "greedy");
  EXPECT_TRUE(now({{"cmd", "get_state"}})["state"]["rebalance"].is_null());

  const std::vector<json> events = recorded("rebalance");
  ASSERT_FALSE(events.empty());
  for (const json& e : events) {
    EXPECT_TRUE(e["ok"].get<bool>()) << e.dump();
    EXPECT_EQ(e["request"]["trigger"], "periodic");
    EXPECT_LT(e["new"]["imbalance"].get<double>(), e["old"]["imbalance"].get<double>());
    EXPECT_FALSE(e["new"]["changes"].empty());
  }
}

TEST_F(RebalanceCommandsTest, BadRequestsAreRefusedWithTheReason) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"cmd", "rebalance"}}, "no expert-load window has closed yet"},
      {{{"cmd", "rebalance"}, {"algorithm", "lpt"}}, "unknown rebalance algorithm 'lpt'"},
      {{{"cmd", "rebalance"}, {"slots", 0}}, "'slots' must be in [1, 8]"},
      {{{"cmd", "rebalance"}, {"apply", "yes"}}, "'apply' must be true or false"},
      {{{"cmd", "rebalance"}, {"proposal", 1}}, "give it with \"apply\": true"},
      {{{"cmd", "rebalance"}, {"apply", true}, {"proposal", 7}}, "proposal 7 is not the latest preview (none is waiting)"},
      {{{"cmd", "rebalance"}, {"aply", true}}, "unknown field 'aply'"},
      {{{"cmd", "set_rebalance"}}, "'mode' must be \"off\" or \"periodic\""},
      {{{"cmd", "set_rebalance"}, {"mode", "periodic"}, {"threshold", 1.2}}, "missing field 'interval_s'"},
      {{{"cmd", "set_rebalance"}, {"mode", "periodic"}, {"interval_s", 1}, {"threshold", 0.5}}, "'threshold' must be"},
      {{{"cmd", "set_rebalance"}, {"mode", "off"}, {"interval_s", 1}}, "unknown field 'interval_s'"},
  };
  for (const auto& [command, error] : cases) {
    const json r = now(command);
    ASSERT_FALSE(r["ok"].get<bool>()) << command.dump();
    EXPECT_NE(r["error"].get<std::string>().find(error), std::string::npos) << r["error"] << " for " << command.dump();
  }
  EXPECT_EQ(deployment_->cluster().topology().placement, initial_);
}

}  // namespace
}  // namespace sy
