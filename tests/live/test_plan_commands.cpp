// The `plan` and `apply_plan` control commands on a running simulated deployment: plans for
// its own model and hardware, the ones it can take live applied at a safe point (ping-pong
// micro-batches and batch size) without losing a token, the others refused with the reason.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "engine/model/random_model.h"
#include "engine/serving/control_commands.h"
#include "engine/serving/telemetry_bridge.h"
#include "engine/sim/sim_deployment.h"
#include "telemetry/telemetry_hub.h"

namespace sy {
namespace {

using nlohmann::json;

class PlanCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override { start("H100"); }

  void start(const std::string& hardware) {
    auto hw = find_hardware_profile("h100");
    ASSERT_TRUE(hw.ok()) << hw.status().message();
    config_ = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::BF16);
    config_.num_layers = 4;
    config_.sparse_layers.assign(4, true);
    config_.num_experts = 8;
    config_.top_k = 2;
    DeploymentOptions o;
    o.link = profile_links(*hw, 8);
    o.coordinator.max_batch_per_rank = 64;
    commands_.reset();
    bridge_.reset();
    deployment_ = std::make_unique<SimDeployment>(config_, *hw, Topology::disaggregated(config_, 2, 4), o);
    telemetry::HubOptions ho;
    ho.endpoint = "tcp://127.0.0.1:0";
    auto hub = telemetry::TelemetryHub::start(ho);
    ASSERT_TRUE(hub.ok()) << hub.status().message();
    hub_ = std::move(hub).value();
    RunInfo info;
    info.backend = hardware.empty() ? "cpu" : "sim";
    info.hardware = hardware;
    info.model_name = "tiny";
    info.model = config_;
    info.devices_per_node = 8;
    bridge_ = std::make_unique<TelemetryBridge>(*deployment_, *hub_, nullptr, info, TelemetryBridge::Options{});
    commands_ = std::make_unique<ControlCommands>(*deployment_, *bridge_, *hub_, ControlCommands::Hooks{});
    WorkloadSpec w;
    w.length_class = LengthClass::Short;
    w.rate_per_s = 400;
    w.duration_s = 0.5;
    w.seed = 5;
    w.vocab_size = config_.vocab_size;
    requests_ = generate_workload(w);
    deployment_->submit(requests_);
  }

  json now(const json& command) {
    json reply;
    commands_->handle(command, [&](const json& r) { reply = r; });
    return reply;
  }
  void at(std::int64_t at_ns, const std::string& tag, json command) {
    deployment_->loop().post(at_ns, [this, tag, command] {
      commands_->handle(command, [this, tag](const json& r) { replies_[tag] = r; });
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
  }

  ModelConfig config_;
  std::unique_ptr<SimDeployment> deployment_;
  std::unique_ptr<telemetry::TelemetryHub> hub_;
  std::unique_ptr<TelemetryBridge> bridge_;
  std::unique_ptr<ControlCommands> commands_;
  std::vector<RequestSpec> requests_;
  std::map<std::string, json> replies_;
};

TEST_F(PlanCommandsTest, PlansForTheRunningDeploymentSayWhichApplyLive) {
  const json r = now({{"cmd", "plan"}, {"top", 3}});
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  EXPECT_EQ(r["current"]["n_a"], 2);
  EXPECT_EQ(r["current"]["n_e"], 4);
  EXPECT_EQ(r["current"]["colocated"], false);
  EXPECT_EQ(r["inputs"]["attention_hardware"], "H100");
  const json& plans = r["plans"];
  ASSERT_GE(plans.size(), 2u);
  std::int32_t applicable = 0, refused = 0;
  for (const json& p : plans) {
    if (p["applicable"].get<bool>()) {
      ++applicable;
      EXPECT_EQ(p["n_a"], 2);
      EXPECT_EQ(p["n_e"], 4);
      EXPECT_EQ(p["tp_a"], 1);
      EXPECT_EQ(p["tp_e"], 1);
      EXPECT_GE(p["m"].get<int>(), p["m_min"].get<int>());
    } else {
      ++refused;
      EXPECT_NE(p["refused"].get<std::string>().find("cannot change live"), std::string::npos) << p.dump();
    }
  }
  EXPECT_GT(applicable, 0);
  // The whole search's best are listed too; on one H100 per device, they use other counts.
  EXPECT_GT(refused, 0);
}

TEST_F(PlanCommandsTest, ApplyingAPlanSetsPingPongAndTheBatchAtASafePointWithoutLosingTokens) {
  const json r = now({{"cmd", "plan"}});
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  json chosen;
  for (const json& p : r["plans"])
    if (p["applicable"].get<bool>()) {
      chosen = p;
      break;
    }
  ASSERT_FALSE(chosen.is_null());
  // Apply a smaller batch than the search's largest so the change is visible in admission.
  chosen["b_a"] = 5;
  at(100'000'000, "apply", {{"cmd", "apply_plan"}, {"plan", chosen}});
  run_and_check_every_token();
  ASSERT_TRUE(replies_["apply"]["ok"].get<bool>()) << replies_["apply"].dump();
  EXPECT_GE(replies_["apply"]["applied_at_ns"].get<std::int64_t>(), 100'000'000);
  const std::int32_t m = chosen["m"].get<std::int32_t>();
  EXPECT_EQ(replies_["apply"]["new"]["policy"]["name"], "pingpong");
  EXPECT_EQ(replies_["apply"]["new"]["policy"]["microbatches"], m);
  EXPECT_EQ(replies_["apply"]["old"]["max_batch_per_rank"], 64);
  EXPECT_EQ(replies_["apply"]["new"]["max_batch_per_rank"], 5 * m);
  EXPECT_EQ(deployment_->coordinator().policy().kind, PolicyKind::PingPong);
  EXPECT_EQ(deployment_->coordinator().max_batch_per_rank(), 5 * m);
}

TEST_F(PlanCommandsTest, PlansThatNeedOtherDevicesAreRefusedWithTheReason) {
  const json other = {{"n_a", 3}, {"n_e", 4}, {"tp_a", 1}, {"tp_e", 2}, {"m", 3}, {"b_a", 16}};
  const json r = now({{"cmd", "apply_plan"}, {"plan", other}});
  ASSERT_FALSE(r["ok"].get<bool>());
  const std::string error = r["error"].get<std::string>();
  EXPECT_NE(error.find("n_a: 3 attention devices, the deployment has 2"), std::string::npos) << error;
  EXPECT_NE(error.find("tp_e: 2"), std::string::npos) << error;
  EXPECT_EQ(error.find("n_e:"), std::string::npos) << error;  // n_e matches
  EXPECT_EQ(deployment_->coordinator().max_batch_per_rank(), 64);
  EXPECT_FALSE(deployment_->coordinator().switching());
}

TEST_F(PlanCommandsTest, BadArgumentsAreRefused) {
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"cmd", "apply_plan"}}, "missing field 'plan'"},
      {{{"cmd", "apply_plan"}, {"plan", 3}}, "'plan' must be an object"},
      {{{"cmd", "apply_plan"}, {"plan", {{"n_a", 2}, {"n_e", 4}, {"tp_a", 1}, {"tp_e", 1}, {"b_a", 4}}}}, "missing 'm'"},
      {{{"cmd", "apply_plan"}, {"plan", {{"n_a", 2}, {"n_e", 4}, {"tp_a", 1}, {"tp_e", 1}, {"m", 0}, {"b_a", 4}}}},
       "'m' must be an integer from 1"},
      {{{"cmd", "apply_plan"}, {"plan", {{"n_a", 2}, {"n_e", 4}, {"tp_a", 1}, {"tp_e", 1}, {"m", 65}, {"b_a", 4}}}},
       "microbatches"},
      {{{"cmd", "apply_plan"}, {"plan", {}}, {"now", true}}, "unknown field 'now'"},
      {{{"cmd", "plan"}, {"top", 0}}, "'top' must be in [1, 100]"},
      {{{"cmd", "plan"}, {"slo_ms", "fast"}}, "'slo_ms' must be a number"},
  };
  for (const auto& [command, expected] : bad) {
    const json r = now(command);
    ASSERT_FALSE(r["ok"].get<bool>()) << command.dump();
    EXPECT_NE(r["error"].get<std::string>().find(expected), std::string::npos)
        << command.dump() << " -> " << r["error"].get<std::string>();
  }
  EXPECT_FALSE(deployment_->coordinator().switching());
}

TEST_F(PlanCommandsTest, WithoutAHardwareProfileThereAreNoPlans) {
  start("");
  const json r = now({{"cmd", "plan"}});
  ASSERT_FALSE(r["ok"].get<bool>());
  EXPECT_NE(r["error"].get<std::string>().find("need a device profile"), std::string::npos) << r.dump();
}

}  // namespace
}  // namespace sy
