// Control commands applied to a running simulated deployment, in process: each command changes
// what it says (at the safe point for policy and placement), echoes itself on the telemetry
// stream, refuses bad arguments without changing anything, and no token is lost or duplicated
// across the changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <tuple>
#include <thread>

#include "engine/model/random_model.h"
#include "engine/serving/control_commands.h"
#include "engine/sim/calibration.h"
#include "engine/sim/sim_deployment.h"
#include "engine/serving/telemetry_bridge.h"
#include "telemetry/subscriber.h"
#include "telemetry/telemetry_hub.h"
#include "telemetry/trace_reader.h"
#include "telemetry/trace_summary.h"

namespace sy {
namespace {

namespace fs = std::filesystem;

using nlohmann::json;

ModelConfig shape() {
  ModelConfig c = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::BF16);
  c.num_layers = 4;
  c.sparse_layers.assign(4, true);
  c.num_experts = 8;
  c.top_k = 2;
  return c;
}

class ControlCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto hw = find_hardware_profile("h100");
    ASSERT_TRUE(hw.ok()) << hw.status().message();
    config_ = shape();
    DeploymentOptions o;
    o.skew_lambda = 0.5;
    o.link = profile_links(*hw, 8);
    o.coordinator.max_batch_per_rank = 64;
    // Random prompts share nothing, so nothing changes but the counting, which the summaries report.
    o.coordinator.prefix_caching = true;
    auto findep = std::make_shared<FindepCostBasis>();
    findep->config = config_;
    findep->primitives = findep_primitives_from_roofline(*hw);
    findep->source = "the test's roofline";
    o.findep_costs = findep;
    deployment_ = std::make_unique<SimDeployment>(config_, *hw, make_topology(), o);
    telemetry::HubOptions ho;
    ho.endpoint = "tcp://127.0.0.1:0";
    auto hub = telemetry::TelemetryHub::start(ho);
    ASSERT_TRUE(hub.ok()) << hub.status().message();
    hub_ = std::move(hub).value();
    RunInfo info;
    info.backend = "sim";
    info.model_name = "test";
    info.model = config_;
    bridge_ = std::make_unique<TelemetryBridge>(*deployment_, *hub_, nullptr, info, TelemetryBridge::Options{});
    record_dir_ = fs::temp_directory_path() / ("sy_test_commands_rec_" + std::to_string(::getpid()));
    fs::remove_all(record_dir_);
    recordings_ = std::make_unique<telemetry::RecordingDirectory>(*telemetry::RecordingDirectory::open(record_dir_));
    commands_ = std::make_unique<ControlCommands>(*deployment_, *bridge_, *hub_, ControlCommands::Hooks{},
                                                  recordings_.get());

    WorkloadSpec w;
    w.length_class = LengthClass::Short;
    w.rate_per_s = 200;
    w.duration_s = 0.5;
    w.seed = 3;
    w.vocab_size = config_.vocab_size;
    requests_ = generate_workload(w);
    deployment_->submit(requests_);
  }

  // 2 attention devices, then 4 expert devices holding the experts round-robin.
  virtual Topology make_topology() { return Topology::disaggregated(config_, 2, 4); }
  // One expert's weights on the sim (bf16).
  std::int64_t expert_bytes() const { return 3 * static_cast<std::int64_t>(config_.hidden_size) * config_.moe_intermediate_size * 2; }

  // Runs `command` on the loop at run time `at`; the reply lands in replies_[tag].
  void at(std::int64_t at_ns, const std::string& tag, json command) {
    deployment_->loop().post(at_ns, [this, tag, command] {
      commands_->handle(command, [this, tag](const json& r) { replies_[tag] = r; });
    });
  }
  json now(json command) {
    json reply;
    commands_->handle(command, [&](const json& r) { reply = r; });
    return reply;
  }
  // Runs until every request is served; checks each one produced exactly its tokens.
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

  // Ends the run's telemetry, stops the recording and opens it.
  StatusOr<std::unique_ptr<telemetry::TraceReader>> stop_recording() {
    bridge_->finish();
    std::promise<json> stopped;
    commands_->handle({{"cmd", "record_stop"}}, [&](const json& r) { stopped.set_value(r); });
    const json stop = stopped.get_future().get();
    if (!stop["ok"].get<bool>()) return Status::Error("record_stop: " + stop.dump());
    return telemetry::TraceReader::open(stop["path"].get<std::string>());
  }

  ModelConfig config_;
  std::unique_ptr<SimDeployment> deployment_;
  std::unique_ptr<telemetry::TelemetryHub> hub_;
  std::unique_ptr<TelemetryBridge> bridge_;
  fs::path record_dir_;
  std::unique_ptr<telemetry::RecordingDirectory> recordings_;
  std::unique_ptr<ControlCommands> commands_;
  std::vector<RequestSpec> requests_;
  std::map<std::string, json> replies_;
};

TEST_F(ControlCommandsTest, PolicyChangesApplyAtTheSafePointWithoutLosingTokens) {
  at(50'000'000, "mtfs", {{"cmd", "set_policy"}, {"params", {{"scheduler", "mtfs"}}}});
  at(150'000'000, "pingpong", {{"cmd", "set_policy"}, {"policy", "pingpong"}, {"params", {{"microbatches", 3}}}});
  at(250'000'000, "m2", {{"cmd", "set_microbatches"}, {"m", 2}});
  at(350'000'000, "sync", {{"cmd", "set_policy"}, {"policy", "sync"}});
  at(450'000'000, "async", {{"cmd", "set_policy"}, {"policy", "async"}, {"params", {{"scheduler", "defrag"}}}});
  run_and_check_every_token();
  for (const char* tag : {"mtfs", "pingpong", "m2", "sync", "async"}) {
    ASSERT_TRUE(replies_.count(tag)) << tag;
    EXPECT_TRUE(replies_[tag]["ok"].get<bool>()) << tag << ": " << replies_[tag].dump();
    EXPECT_GE(replies_[tag]["applied_at_ns"].get<std::int64_t>(), 50'000'000) << tag;
  }
  EXPECT_EQ(replies_["pingpong"]["new"]["microbatches"], 3);
  EXPECT_EQ(replies_["m2"]["old"]["microbatches"], 3);
  EXPECT_EQ(deployment_->coordinator().policy().kind, PolicyKind::Async);
  EXPECT_EQ(deployment_->coordinator().policy_switches(), 5);
}

TEST_F(ControlCommandsTest, FindepAutoAppliesTheSolversConfiguration) {
  at(100'000'000, "auto", {{"cmd", "set_policy"}, {"policy", "findep"}, {"params", {{"expert_chunks", "auto"}}}});
  at(300'000'000, "async", {{"cmd", "set_policy"}, {"policy", "async"}});
  run_and_check_every_token();
  ASSERT_TRUE(replies_.count("auto"));
  const json& r = replies_["auto"];
  ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
  // The reply names the choice and what it was planned for; the policy applied is that choice.
  const json& f = r["findep"];
  EXPECT_EQ(r["new"]["name"], "findep");
  EXPECT_EQ(r["new"]["microbatches"], f["r1"]);
  EXPECT_EQ(r["new"]["expert_chunks"], f["r2"]);
  EXPECT_EQ(r["new"]["order"], f["order"]);
  EXPECT_LE(f["r1"].get<std::int64_t>() * f["ma"].get<std::int64_t>(), 64);
  EXPECT_GT(f["predicted_tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(f["attention_ranks"], 2);
  EXPECT_EQ(f["expert_devices"], 4);
  EXPECT_EQ(f["batch_per_rank"], 64);
  EXPECT_GT(f["mean_context"].get<double>(), 1);  // requests were running at 100 ms
  EXPECT_EQ(f["costs"], "the test's roofline");
  EXPECT_TRUE(replies_["async"]["ok"].get<bool>());
  EXPECT_EQ(deployment_->coordinator().policy_switches(), 2);
}

// Tokens routed per (block, expert, device), before and after the first placement switch.
struct RoutedCounter : RuntimeObserver {
  const Coordinator* co = nullptr;
  std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::int64_t> before, after;
  void on_routed(std::int32_t block, std::int32_t expert, std::int32_t device, std::int64_t tokens,
                 std::int64_t /*at_ns*/) override {
    (co->placement_changes() == 0 ? before : after)[{block, expert, device}] += tokens;
  }
};

TEST_F(ControlCommandsTest, PlacementChangesMoveTheExpertsTokens) {
  // Devices 2-5 hold the experts round-robin: expert 1 on device 3, expert 0 on device 2.
  const Placement& before = deployment_->cluster().topology().placement;
  ASSERT_EQ(before.devices(1, 1), std::vector<std::int32_t>{3});
  RoutedCounter routed;
  routed.co = &deployment_->coordinator();
  deployment_->observers().add(&routed, nullptr);
  at(100'000'000, "move", {{"cmd", "move_expert"}, {"block", 1}, {"expert", 1}, {"from", 3}, {"to", 5}});
  at(100'000'000, "replicate", {{"cmd", "replicate_expert"}, {"expert", 0}, {"to", 4}});
  run_and_check_every_token();
  ASSERT_TRUE(replies_["move"]["ok"].get<bool>()) << replies_["move"].dump();
  ASSERT_TRUE(replies_["replicate"]["ok"].get<bool>()) << replies_["replicate"].dump();
  // Both had weights to copy first: answered at once as pending, with the copies started.
  EXPECT_EQ(replies_["move"]["pending"], true);
  EXPECT_EQ(replies_["move"]["copies"],
            json::array({{{"block", 1}, {"expert", 1}, {"from", 3}, {"to", 5}, {"bytes", expert_bytes()},
                          {"started_ns", 100'000'000}}}));
  ASSERT_EQ(replies_["replicate"]["copies"].size(), 4u);
  for (const json& copy : replies_["replicate"]["copies"]) EXPECT_EQ(copy["from"], 2) << copy.dump();
  EXPECT_EQ(deployment_->coordinator().placement_changes(), 1) << "staged together, switched at one safe point";
  const Topology& topo = deployment_->cluster().topology();
  EXPECT_EQ(topo.placement.devices(1, 1), std::vector<std::int32_t>{5});
  EXPECT_EQ(topo.placement.devices(2, 1), std::vector<std::int32_t>{3});  // other blocks unchanged
  for (std::int32_t b = 0; b < 4; ++b) EXPECT_EQ(topo.placement.devices(b, 0), (std::vector<std::int32_t>{2, 4})) << b;
  // The state reports the new placement, and the replica on device 4 served tokens.
  const json state = now({{"cmd", "get_state"}})["state"];
  EXPECT_EQ(state["placement"][1][1], json::array({5}));
  EXPECT_EQ(state["placement"][3][0], json::array({2, 4}));
  // Before the switch its tokens went to device 3 (also while the weights were copied), after
  // it to device 5; expert 0's tokens now reach both replicas.
  EXPECT_GT((routed.before[{1, 1, 3}]), 0);
  EXPECT_EQ((routed.after[{1, 1, 3}]), 0);
  EXPECT_GT((routed.after[{1, 1, 5}]), 0);
  EXPECT_GT((routed.after[{2, 0, 2}]), 0);
  EXPECT_GT((routed.after[{2, 0, 4}]), 0);
  deployment_->observers().remove(&routed, nullptr);
}

// A move copies the expert's weights to its target before the switch: get_state shows the copy
// pending, the recording shows it as a weight_fetch span on the target and the drain to the
// switch as a `weights` stall, the control topic announces the switch, and the source's copy is
// freed afterwards.
TEST_F(ControlCommandsTest, AMoveCopiesTheWeightsAndTheRecordingShowsIt) {
  const json started = now({{"cmd", "record_start"}, {"path", "weights.db"}});
  ASSERT_TRUE(started["ok"].get<bool>()) << started.dump();
  const json before = now({{"cmd", "get_state"}})["state"]["weights"];
  EXPECT_EQ(before["expert_bytes"], expert_bytes());
  EXPECT_EQ(before["devices"][3]["experts"], 8);  // experts 1 and 5 in 4 blocks
  EXPECT_EQ(before["devices"][5]["used_bytes"], 8 * expert_bytes());
  EXPECT_GT(before["devices"][5]["capacity_bytes"].get<std::int64_t>(), 70'000'000'000) << "the h100's memory";
  EXPECT_GT(before["devices"][0]["kv_bytes"].get<std::int64_t>(), 0) << "an attention rank's KV pages count";
  at(100'000'000, "move", {{"cmd", "move_expert"}, {"block", 1}, {"expert", 1}, {"from", 3}, {"to", 5}});
  at(100'000'001, "during", {{"cmd", "get_state"}});
  run_and_check_every_token();
  ASSERT_EQ(replies_["move"]["pending"], true) << replies_["move"].dump();
  const json during = replies_["during"]["state"]["weights"];
  EXPECT_EQ(during["staged"], true);
  ASSERT_EQ(during["copies"].size(), 1u);
  EXPECT_EQ(during["copies"][0]["to"], 5);
  EXPECT_EQ(during["devices"][5]["arriving"], 1);
  EXPECT_EQ(during["devices"][5]["used_bytes"], 9 * expert_bytes());
  EXPECT_EQ(replies_["during"]["state"]["placement"][1][1], json::array({3})) << "still serving the old placement";
  const json after = now({{"cmd", "get_state"}})["state"]["weights"];
  EXPECT_EQ(after["staged"], false);
  EXPECT_TRUE(after["copies"].empty());
  EXPECT_EQ(after["devices"][3]["experts"], 7);
  EXPECT_EQ(after["devices"][5]["experts"], 9);

  auto trace = stop_recording();
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  auto spans = (*trace)->spans();
  ASSERT_TRUE(spans.ok());
  std::vector<telemetry::Span> fetches;
  std::int64_t weights_stall_ns = 0;
  for (const telemetry::Span& s : *spans) {
    if (s.kind == telemetry::SpanKind::WeightFetch) fetches.push_back(s);
    if (s.kind == telemetry::SpanKind::Stall && s.stall_reason == telemetry::StallReason::Weights)
      weights_stall_ns += s.end_ns - s.start_ns;
  }
  ASSERT_EQ(fetches.size(), 1u);
  const telemetry::Span& f = fetches[0];
  EXPECT_EQ(std::tie(f.device, f.peer, f.block, f.index), std::make_tuple(5, 3, 1, 1));
  EXPECT_EQ(f.lane, telemetry::Lane::Receive);
  EXPECT_EQ(f.start_ns, 100'000'000);
  // NVLink within the node: the link's latency plus the bytes at its bandwidth.
  auto hw = find_hardware_profile("h100");
  const auto link_ns = static_cast<std::int64_t>(hw->nvlink_latency_us * 1e3) +
                       static_cast<std::int64_t>(static_cast<double>(expert_bytes()) / hw->nvlink_gbps);
  EXPECT_EQ(f.end_ns - f.start_ns, link_ns);
  EXPECT_GT(weights_stall_ns, 0) << "devices idle while the coordinator drains for the switch";
  // The summaries carry the weights stall share; the control events the copy and the switch.
  double weights_share = 0;
  auto summaries = (*trace)->summaries();
  ASSERT_TRUE(summaries.ok());
  for (const std::string& text : *summaries) {
    const json summary = json::parse(text);
    for (const json& d : summary["devices"]) weights_share += d["stall"]["weights"].get<double>();
  }
  EXPECT_GT(weights_share, 0);
  std::vector<std::string> phases;
  auto control = (*trace)->control_events();
  ASSERT_TRUE(control.ok());
  for (const std::string& text : *control) {
    const json e = json::parse(text);
    if (e["cmd"] == "move_expert") phases.push_back(e.value("phase", ""));
  }
  EXPECT_EQ(phases, (std::vector<std::string>{"copying", "applied"}));
}

// The window summaries say where each device's time goes (issue 17's diagnostics, the console's
// Devices view): shipments sent and the head-of-line wait of every queue take, adding up over
// the run to what the metrics collector counted; and the recording of the run holds every one.
TEST_F(ControlCommandsTest, SummariesCountShipmentsAndQueueWaits) {
  const json started = now({{"cmd", "record_start"}, {"path", "traffic.db"}});
  ASSERT_TRUE(started["ok"].get<bool>()) << started.dump();
  run_and_check_every_token();
  auto trace = stop_recording();
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  const std::size_t D = 6;
  std::vector<std::int64_t> transfers(D, 0), takes(D, 0), executions(D, 0);
  std::vector<double> transfer_rows(D, 0), wait_ms(D, 0), wait_max_ms(D, 0);
  std::int64_t prefix_queries = 0;
  auto summaries = (*trace)->summaries();
  ASSERT_TRUE(summaries.ok());
  for (const std::string& text : *summaries) {
    const json summary = json::parse(text);
    prefix_queries += summary["prefix_cache"]["queries"].get<std::int64_t>();
    for (const json& d : summary["devices"]) {
      const auto i = d["device"].get<std::size_t>();
      ASSERT_TRUE(d.contains("transfers") && d.contains("queue_takes") && d.contains("queue_wait_ms")) << d.dump();
      transfers[i] += d["transfers"].get<std::int64_t>();
      transfer_rows[i] += d["rows_per_transfer"].get<double>() * d["transfers"].get<double>();
      const auto n = d["queue_takes"].get<std::int64_t>();
      takes[i] += n;
      executions[i] += d["executions"].get<std::int64_t>();
      const double mean = d["queue_wait_ms"]["mean"].get<double>(), max = d["queue_wait_ms"]["max"].get<double>();
      EXPECT_GE(mean, 0);
      EXPECT_GE(max, mean);
      wait_ms[i] += mean * static_cast<double>(n);
      wait_max_ms[i] = std::max(wait_max_ms[i], max);
    }
  }
  // On the sim's virtual clock the producers wait for the recorder rather than drop: the
  // recording holds every shipment.
  auto spans = (*trace)->spans();
  ASSERT_TRUE(spans.ok());
  std::vector<std::int64_t> transfer_spans(D, 0);
  for (const telemetry::Span& s : *spans)
    if (s.kind == telemetry::SpanKind::Transfer && s.lane == telemetry::Lane::Send)
      ++transfer_spans[static_cast<std::size_t>(s.device)];
  const MetricsReport whole = deployment_->metrics().report(0, deployment_->loop().now() + 1);
  // Each window counts what was admitted in it; together, everything.
  EXPECT_GT(prefix_queries, 0);
  EXPECT_EQ(prefix_queries, deployment_->coordinator().prefix_cache_queries());
  ASSERT_EQ(whole.devices.size(), D);
  for (std::size_t i = 0; i < D; ++i) {
    const DeviceUsage& u = whole.devices[i];
    EXPECT_GT(transfers[i], 0) << "device " << i;
    EXPECT_EQ(transfers[i], u.transfers) << "device " << i;
    EXPECT_EQ(transfer_spans[i], u.transfers) << "device " << i << ": the recording lost shipments";
    EXPECT_NEAR(transfer_rows[i], u.rows_per_transfer * static_cast<double>(u.transfers), 1e-6 * transfer_rows[i])
        << "device " << i;
    EXPECT_GT(takes[i], 0) << "device " << i;
    EXPECT_EQ(takes[i], u.queue_waits) << "device " << i;
    EXPECT_NEAR(wait_ms[i] / static_cast<double>(takes[i]), u.queue_wait_mean_ms, 1e-6 * u.queue_wait_mean_ms + 1e-9)
        << "device " << i;
    EXPECT_DOUBLE_EQ(wait_max_ms[i], u.queue_wait_max_ms) << "device " << i;
    EXPECT_GT(executions[i], 0) << "device " << i;
    EXPECT_EQ(executions[i], u.executions) << "device " << i << ": the live view and the device table count differently";
  }
  // `trace summarize` counts from the spans what the device table counts.
  auto summary = telemetry::summarize_trace(**trace);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  for (const telemetry::DeviceSummary& d : summary->devices) {
    ASSERT_LT(static_cast<std::size_t>(d.device), D);
    EXPECT_EQ(d.executions, whole.devices[static_cast<std::size_t>(d.device)].executions) << "device " << d.device;
  }
}

// set_placement, the one path every placement takes (rebalancing included), under ping-pong:
// experts 0 and 1 swap devices in every block, which copies both ways; no token is lost and
// the swapped weights end up only where the new placement puts them.
TEST_F(ControlCommandsTest, ASwappingPlacementUnderPingpongLosesNoToken) {
  at(1, "pingpong", {{"cmd", "set_policy"}, {"policy", "pingpong"}, {"params", {{"microbatches", 2}}}});
  Placement swapped = deployment_->cluster().topology().placement;
  for (std::int32_t b = 0; b < 4; ++b) {
    ASSERT_TRUE(swapped.set(b, 0, {3}).ok());
    ASSERT_TRUE(swapped.set(b, 1, {2}).ok());
  }
  at(150'000'000, "swap", {{"cmd", "set_placement"}, {"placement", swapped.to_json()}});
  run_and_check_every_token();
  ASSERT_TRUE(replies_["swap"]["ok"].get<bool>()) << replies_["swap"].dump();
  EXPECT_EQ(replies_["swap"]["pending"], true);
  EXPECT_EQ(replies_["swap"]["copies"].size(), 8u);
  EXPECT_EQ(deployment_->cluster().topology().placement, swapped);
  const ExpertResidency& r = deployment_->cluster().residency();
  for (std::int32_t b = 0; b < 4; ++b) {
    EXPECT_TRUE(r.resident(b, 0, 3) && !r.resident(b, 0, 2)) << b;
    EXPECT_TRUE(r.resident(b, 1, 2) && !r.resident(b, 1, 3)) << b;
  }
  EXPECT_EQ(r.resident_experts(2), 8);
  EXPECT_EQ(r.resident_experts(3), 8);
}

// Device 5's memory holds exactly the experts it has: a copy to it is refused at once, naming
// the device and the bytes, and nothing changes; a move away from it still goes ahead.
class TightMemoryTest : public ControlCommandsTest {
 protected:
  Topology make_topology() override {
    Topology t = Topology::disaggregated(config_, 2, 4);
    t.device_memory_bytes = {0, 0, 0, 0, 0, 8 * expert_bytes()};
    return t;
  }
};

TEST_F(TightMemoryTest, ACopyThatDoesNotFitIsRefused) {
  const json placement_before = now({{"cmd", "get_state"}})["state"]["placement"];
  const std::string expected = "device 5 (" + deployment_->cluster().topology().device_names[5] +
                               ") has no room for the weights: 1 expert needs " + std::to_string(expert_bytes()) +
                               " bytes, 0 of its " + std::to_string(8 * expert_bytes()) + " bytes are free";
  const json move = now({{"cmd", "move_expert"}, {"block", 1}, {"expert", 1}, {"from", 3}, {"to", 5}});
  EXPECT_FALSE(move["ok"].get<bool>());
  EXPECT_EQ(move["error"], "move_expert: " + expected);
  const json replicate = now({{"cmd", "replicate_expert"}, {"expert", 0}, {"to", 5}});
  EXPECT_FALSE(replicate["ok"].get<bool>());
  EXPECT_NE(replicate["error"].get<std::string>().find("4 experts need"), std::string::npos) << replicate.dump();
  const json state = now({{"cmd", "get_state"}})["state"];
  EXPECT_EQ(state["placement"], placement_before);
  EXPECT_TRUE(state["weights"]["copies"].empty());
  EXPECT_EQ(state["weights"]["staged"], false);
  const json away = now({{"cmd", "move_expert"}, {"block", 1}, {"expert", 3}, {"from", 5}, {"to", 2}});
  EXPECT_TRUE(away["ok"].get<bool>()) << away.dump();
  run_and_check_every_token();
  EXPECT_EQ(deployment_->cluster().topology().placement.devices(1, 3), std::vector<std::int32_t>{2});
  EXPECT_EQ(deployment_->cluster().residency().used_bytes(5), 7 * expert_bytes());
}

TEST_F(ControlCommandsTest, BadArgumentsAreRefusedAndChangeNothing) {
  const json state_before = now({{"cmd", "get_state"}})["state"];
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"cmd", "set_policy"}, {"policy", "fastest"}}, "unknown policy 'fastest'"},
      {{{"cmd", "set_policy"}, {"params", {{"lookahed", 3}}}}, "unknown key 'lookahed'"},
      {{{"cmd", "set_policy"}, {"params", {{"decay", 2.0}}}}, "decay"},
      {{{"cmd", "set_policy"}}, "nothing to change"},
      {{{"cmd", "set_policy"}, {"policy", 7}}, "'policy' must be a string"},
      {{{"cmd", "set_policy"}, {"policy", "pingpong"}, {"params", {{"expert_chunks", "auto"}}}}, "is findep's"},
      {{{"cmd", "set_policy"}, {"policy", "findep"}, {"params", {{"expert_chunks", "auto"}, {"microbatches", 2}}}},
       "chooses microbatches too"},
      {{{"cmd", "set_policy"}, {"policy", "findep"}, {"params", {{"expert_chunks", "many"}}}},
       "expert_chunks must be an integer"},
      {{{"cmd", "set_microbatches"}, {"m", 0}}, "'m' must be in [1, 64]"},
      {{{"cmd", "set_microbatches"}, {"m", "three"}}, "'m' must be an integer"},
      {{{"cmd", "set_microbatches"}, {"m", 2.5}}, "'m' must be an integer"},
      {{{"cmd", "set_microbatches"}}, "missing field 'm'"},
      {{{"cmd", "move_expert"}, {"expert", 1}, {"from", 2}, {"to", 5}}, "is not on device 2"},
      {{{"cmd", "move_expert"}, {"expert", 1}, {"from", 3}, {"to", 3}}, "the same device"},
      {{{"cmd", "move_expert"}, {"expert", 9}, {"from", 3}, {"to", 4}}, "'expert' must be in [0, 7]"},
      {{{"cmd", "move_expert"}, {"expert", 1}, {"from", 3}, {"to", 99}}, "'to' must be in [0, 5]"},
      {{{"cmd", "move_expert"}, {"block", 4}, {"expert", 1}, {"from", 3}, {"to", 4}}, "'block' must be in [-1, 3]"},
      {{{"cmd", "move_expert"}, {"expert", 1}, {"from", 3}, {"to", 4}, {"blok", 1}}, "unknown field 'blok'"},
      {{{"cmd", "replicate_expert"}, {"expert", 1}, {"to", 3}}, "already on device 3"},
      {{{"cmd", "set_placement"}, {"placement", json::array()}}, "placement has 0 blocks"},
      {{{"cmd", "set_placement"}, {"placement", "all"}}, "must be a list"},
      {{{"cmd", "set_placement"}, {"placement", json::array({json::array(), json::array(), json::array(), json::array()})}},
       "lists 0 experts"},
      {{{"cmd", "record_stop"}}, "no recording is running"},
      {{{"cmd", "record_start"}}, "'path' must be a non-empty string"},
      {{{"cmd", "record_start"}, {"path", "/nonexistent-dir/x.db"}}, "absolute path"},
      {{{"cmd", "record_start"}, {"path", "../x.db"}}, "'..' leaves the recording directory"},
      {{{"cmd", "record_start"}, {"path", "sub/x.db"}}, "does not exist"},
      {{{"cmd", "record_start"}, {"path", "x.txt"}}, "must end in .db"},
      {{{"cmd", "record_start"}, {"mode", "tape"}, {"path", "r.db"}}, "'mode' must be \"file\""},
      {{{"cmd", "record_start"}, {"mode", "ring"}, {"path", "r.db"}}, "a ring keeps the last 'minutes' or 'megabytes'"},
      {{{"cmd", "record_start"}, {"mode", "ring"}, {"path", "r.db"}, {"minutes", -1}}, "'minutes' must be a positive"},
      {{{"cmd", "record_start"}, {"mode", "ring"}, {"path", "../r.db"}, {"minutes", 1}}, "'..' leaves the recording"},
      {{{"cmd", "record_start"}, {"mode", "ring"}, {"path", "r.db"}, {"minutes", 1}, {"trigger", {{"p99", 3}}}},
       "unknown trigger 'p99'"},
      {{{"cmd", "record_start"}, {"mode", "ring"}, {"path", "r.db"}, {"minutes", 1}, {"trigger", {{"stall_fraction", 2}}}},
       "at most 1"},
      {{{"cmd", "record_start"}, {"path", "r.db"}, {"minutes", 1}}, "unknown field 'minutes'"},
      {{{"cmd", "record_start"}, {"mode", "ring"}, {"path", "r.db"}, {"megabytes", 1e6}}, "'megabytes' must be at most 4096"},
      {{{"cmd", "record_dump"}}, "no flight recorder is running"},
      {{{"cmd", "set_workload"}, {"rate", 10}}, "not generated live"},
      {{{"cmd", "pause"}, {"now", true}}, "unknown field 'now'"},
      {{{"cmd", "set_max_num_batched_tokens"}, {"n", -1}}, "'n' must be in [0, 16777216]"},
      {{{"cmd", "set_max_num_batched_tokens"}}, "missing field 'n'"},
      {{{"cmd", "reboot"}}, "unknown command 'reboot'"},
      {{{"cmd", 5}}, "string field \"cmd\""},
  };
  for (const auto& [command, expected] : bad) {
    const json reply = now(command);
    EXPECT_FALSE(reply["ok"].get<bool>()) << command.dump();
    EXPECT_NE(reply.value("error", "").find(expected), std::string::npos)
        << command.dump() << " -> " << reply.dump() << " (expected '" << expected << "')";
  }
  EXPECT_FALSE(deployment_->coordinator().switching());
  const json state_after = now({{"cmd", "get_state"}})["state"];
  for (const char* key : {"policy", "placement", "admission_paused", "recording", "switching"})
    EXPECT_EQ(state_before[key], state_after[key]) << key;
  run_and_check_every_token();
}

// The flight recorder over control: a trigger that the first window trips writes the ring by
// itself; record_dump writes it on demand; record_stop discards it.
TEST_F(ControlCommandsTest, AFlightRecorderDumpsOnATriggerAndOnDemand) {
  const json started = now({{"cmd", "record_start"}, {"mode", "ring"}, {"path", "auto.db"}, {"minutes", 1},
                            {"trigger", {{"stall_fraction", 0.0001}}}});
  ASSERT_TRUE(started["ok"].get<bool>()) << started.dump();
  EXPECT_EQ(started["new"]["minutes"], 1);
  EXPECT_FALSE(now({{"cmd", "record_start"}, {"mode", "ring"}, {"path", "x.db"}, {"minutes", 1}})["ok"].get<bool>());
  EXPECT_FALSE(now({{"cmd", "get_state"}})["state"]["ring"].is_null());
  // 'overwrite' of the wrong type without a path: refused (it threw on the loop and ended the
  // engine); and the ring's own file, when it is not a recording, is not replaced.
  const json typed = now({{"cmd", "record_dump"}, {"overwrite", "x"}});
  EXPECT_FALSE(typed["ok"].get<bool>());
  EXPECT_NE(typed["error"].get<std::string>().find("'overwrite' must be true or false"), std::string::npos) << typed;
  {
    std::ofstream(started["path"].get<std::string>()) << "not a recording";
    const json refused = now({{"cmd", "record_dump"}, {"overwrite", true}});
    EXPECT_FALSE(refused["ok"].get<bool>());
    EXPECT_NE(refused["error"].get<std::string>().find("is not a Switchyard recording"), std::string::npos) << refused;
    fs::remove(started["path"].get<std::string>());
  }
  run_and_check_every_token();
  bridge_->finish();

  const fs::path automatic = fs::path(started["path"].get<std::string>());
  bool dumped = false;
  for (int i = 0; i < 500 && !dumped; ++i) {
    auto r = telemetry::TraceReader::open(automatic);
    dumped = r.ok() && (*r)->metadata().count("complete") && (*r)->metadata().at("complete") == "1";
    if (!dumped) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(dumped) << automatic;
  auto trig = telemetry::TraceReader::open(automatic);
  ASSERT_TRUE(trig.ok());
  EXPECT_NE((*trig)->metadata().at("trigger").find("stall_fraction"), std::string::npos);
  EXPECT_FALSE((*trig)->spans()->empty());

  std::promise<json> reply;
  commands_->handle({{"cmd", "record_dump"}, {"path", "asked.db"}}, [&](const json& r) { reply.set_value(r); });
  const json dumped_reply = reply.get_future().get();
  ASSERT_TRUE(dumped_reply["ok"].get<bool>()) << dumped_reply.dump();
  auto asked = telemetry::TraceReader::open(dumped_reply["path"].get<std::string>());
  ASSERT_TRUE(asked.ok()) << asked.status().message();
  EXPECT_EQ((*asked)->metadata().at("flight_recorder"), "1");
  EXPECT_EQ((*asked)->schema_version(), 2);
  auto spans = (*asked)->spans();
  ASSERT_TRUE(spans.ok());
  EXPECT_GE(spans->size(), (*trig)->spans()->size()) << "the whole run, not only up to the trigger";

  const json stopped = now({{"cmd", "record_stop"}});
  EXPECT_TRUE(stopped["ok"].get<bool>()) << stopped.dump();
  EXPECT_EQ(stopped["mode"], "ring");
  EXPECT_TRUE(now({{"cmd", "get_state"}})["state"]["ring"].is_null());
  EXPECT_FALSE(now({{"cmd", "record_dump"}})["ok"].get<bool>());
}

TEST_F(ControlCommandsTest, PauseHoldsNewRequestsUntilResume) {
  at(1, "pause", {{"cmd", "pause"}});
  bool checked = false;
  deployment_->loop().post(200'000'000, [&] {
    // Arrivals since the pause wait; none was admitted.
    const auto& records = deployment_->coordinator().requests();
    EXPECT_TRUE(std::none_of(records.begin(), records.end(),
                             [](const RequestRecord& r) { return r.state == RequestState::Running; }));
    EXPECT_GT(deployment_->coordinator().waiting(), 0u);
    checked = true;
    commands_->handle({{"cmd", "resume"}}, [&](const json& r) { replies_["resume"] = r; });
  });
  run_and_check_every_token();
  EXPECT_TRUE(checked);
  EXPECT_EQ(replies_["pause"]["new"]["admission_paused"], true);
  EXPECT_EQ(replies_["resume"]["old"]["admission_paused"], true);
}

// Chunked prefill's budget set live: the passes after it keep it (decodes beyond it bring one
// prompt row at most), the ones before did not, and every request gets all its tokens.
TEST_F(ControlCommandsTest, SetMaxNumBatchedTokensBoundsThePassesFromThenOn) {
  struct Passes final : RequestObserver {
    explicit Passes(const Coordinator& co) : co_(co) {}
    void on_request(const RequestUpdate&) override {}
    void on_pass(std::int32_t, std::span<const TokenRow> rows) override {
      const auto n = static_cast<std::int64_t>(rows.size());
      if (co_.options().max_num_batched_tokens == 0) {
        most_before = std::max(most_before, n);
        return;
      }
      std::int64_t decodes = 0;
      for (const TokenRow& r : rows)
        if (r.position >= static_cast<std::int32_t>(co_.requests()[static_cast<std::size_t>(r.request - co_.first_request())].spec.prompt.size()))
          ++decodes;
      EXPECT_LE(n, std::max<std::int64_t>(8, decodes + 1));
      ++after;
    }
    const Coordinator& co_;
    std::int64_t most_before = 0, after = 0;
  } passes(deployment_->coordinator());
  deployment_->observers().add(nullptr, &passes);
  at(50'000'000, "chunk", {{"cmd", "set_max_num_batched_tokens"}, {"n", 8}});
  run_and_check_every_token();
  deployment_->observers().remove(nullptr, &passes);
  EXPECT_EQ(replies_["chunk"]["old"]["max_num_batched_tokens"], 0) << replies_["chunk"].dump();
  EXPECT_EQ(replies_["chunk"]["new"]["max_num_batched_tokens"], 8);
  // get_state's meta says the budget in force (the console shows it beside admission).
  const json batching = now({{"cmd", "get_state"}})["state"]["batching"];
  EXPECT_EQ(batching["max_num_batched_tokens"], 8) << batching.dump();
  EXPECT_EQ(batching["max_batch_per_rank"], deployment_->coordinator().max_batch_per_rank());
  EXPECT_GT(passes.most_before, 8) << "the passes before the command were not cut";
  EXPECT_GT(passes.after, 0);
}

TEST_F(ControlCommandsTest, ChangesAreEchoedOnTheControlTopic) {
  auto sub = telemetry::Subscriber::connect(hub_->endpoint());
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  // The SUB connects asynchronously: publish meta until the subscriber has seen one.
  bool joined = false;
  for (int i = 0; i < 400 && !joined; ++i) {
    bridge_->publish_meta();
    for (const auto& b : (*sub)->poll(std::chrono::milliseconds(10)))
      if (b.topic == telemetry::Topic::Meta) joined = true;
  }
  ASSERT_TRUE(joined);
  at(10'000'000, "pause", {{"cmd", "pause"}});
  at(20'000'000, "resume", {{"cmd", "resume"}});
  at(30'000'000, "mtfs", {{"cmd", "set_policy"}, {"params", {{"scheduler", "mtfs"}}}});
  at(40'000'000, "bad", {{"cmd", "set_microbatches"}, {"m", -1}});
  run_and_check_every_token();
  bridge_->finish();
  std::vector<json> events;
  for (int i = 0; i < 200 && events.size() < 4; ++i) {
    for (const auto& b : (*sub)->poll(std::chrono::milliseconds(20))) {
      if (b.topic != telemetry::Topic::Control) continue;
      for (const json& e : json::parse(b.json)) events.push_back(e);
    }
  }
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0]["cmd"], "pause");
  EXPECT_EQ(events[1]["cmd"], "resume");
  EXPECT_EQ(events[2]["cmd"], "set_policy");
  EXPECT_EQ(events[2]["new"]["scheduler"], "mtfs");
  EXPECT_EQ(events[2]["old"]["scheduler"], "defrag");
  EXPECT_EQ(events[3]["cmd"], "set_microbatches");
  EXPECT_FALSE(events[3]["ok"].get<bool>());
  EXPECT_NE(events[3]["error"].get<std::string>().find("'m' must be in"), std::string::npos);
  for (const json& e : events) EXPECT_TRUE(e.contains("t_ns") && e.contains("request")) << e.dump();
}

}  // namespace
}  // namespace sy
