// `switchyard demo` as operators run it: a subscriber sees every event kind soon after it
// starts; every control command works live on the sim and the cpu backend and shows on the
// stream and in a recording; a recording killed with SIGKILL is a valid database; Prometheus
// serves the serving metrics while it runs.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tests/live/demo_process.h"
#include "telemetry/control_client.h"
#include "telemetry/curve_keys.h"
#include "telemetry/subscriber.h"
#include "telemetry/trace_reader.h"

namespace sy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using sy::testing::DemoProcess;
using Clock = std::chrono::steady_clock;

constexpr const char* kEndpoints = "telemetry (tcp://[0-9.]+:[0-9]+), control (tcp://[0-9.]+:[0-9]+)";

struct Endpoints {
  std::string telemetry, control;
};

Endpoints endpoints_of(DemoProcess& demo) {
  Endpoints e;
  e.telemetry = demo.wait_for("telemetry (tcp://[0-9.]+:[0-9]+)");
  e.control = demo.wait_for("control (tcp://[0-9.]+:[0-9]+)");
  return e;
}

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("sy_test_live_" + std::to_string(::getpid()) + "_" + name);
}

std::vector<std::string> demo_args(const std::string& backend, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"demo", "--backend", backend, "--duration", "60", "--telemetry", "tcp://127.0.0.1:0",
                                   "--control", "tcp://127.0.0.1:0", "--no-console"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(DemoLive, SubscriberSeesEveryEventKindSoonAfterTheStart) {
  DemoProcess demo(demo_args("sim"));
  ASSERT_TRUE(demo.started());
  const Endpoints ep = endpoints_of(demo);
  ASSERT_FALSE(ep.telemetry.empty()) << demo.output();
  const auto started = Clock::now();
  auto sub = telemetry::Subscriber::connect(ep.telemetry);
  ASSERT_TRUE(sub.ok()) << sub.status().message();
  auto control = telemetry::ControlClient::connect(ep.control);
  ASSERT_TRUE(control.ok());
  // Control events exist only when someone steers: pause and resume admission once.
  for (const char* cmd : {R"({"cmd":"pause"})", R"({"cmd":"resume"})"}) {
    auto r = (*control)->call(cmd, std::chrono::seconds(10));
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  std::map<telemetry::Topic, double> first_seen;
  while (first_seen.size() < std::size(telemetry::kAllTopics) && Clock::now() - started < std::chrono::seconds(20)) {
    for (const auto& b : (*sub)->poll(std::chrono::milliseconds(50)))
      first_seen.emplace(b.topic, std::chrono::duration<double>(Clock::now() - started).count());
  }
  for (telemetry::Topic t : telemetry::kAllTopics) {
    ASSERT_TRUE(first_seen.count(t)) << "no " << telemetry::topic_name(t) << " message";
    std::printf("  %-12s first seen %.3f s after the demo printed its endpoints\n",
                std::string(telemetry::topic_name(t)).c_str(), first_seen[t]);
  }
  double last = 0;
  for (const auto& [topic, t] : first_seen) last = std::max(last, t);
  // Meta comes every 250 ms and summaries every 500 ms of (paced) run time; the margin is for a
  // loaded CI machine, not part of the claim.
  EXPECT_LT(last, 3.0);
}

class DemoCommands : public ::testing::TestWithParam<std::string> {};

TEST_P(DemoCommands, EveryCommandWorksLiveAndShowsInStreamAndRecording) {
  const fs::path cache = temp_path("cache_" + GetParam());
  // record_start names a file inside the recording directory chosen at start-up.
  const fs::path record_dir = temp_path("recordings_" + GetParam());
  const std::string trace_name = "commands_" + GetParam() + ".db";
  const fs::path trace = record_dir / trace_name;
  fs::remove_all(record_dir);
  DemoProcess demo(demo_args(GetParam(), {"--record-dir", record_dir.string()}), {"XDG_CACHE_HOME=" + cache.string()});
  const Endpoints ep = endpoints_of(demo);
  ASSERT_FALSE(ep.control.empty()) << demo.output();
  auto sub = telemetry::Subscriber::connect(ep.telemetry);
  auto control = telemetry::ControlClient::connect(ep.control);
  ASSERT_TRUE(sub.ok() && control.ok());
  auto call = [&](const json& command) {
    auto r = (*control)->call(command.dump(), std::chrono::seconds(15));
    EXPECT_TRUE(r.ok()) << command.dump() << ": " << r.status().message();
    return r.ok() ? json::parse(*r) : json::object();
  };
  // Let the subscriber join before anything is steered.
  const auto joined = Clock::now();
  while (Clock::now() - joined < std::chrono::seconds(20)) {
    bool meta = false;
    for (const auto& b : (*sub)->poll(std::chrono::milliseconds(50))) meta |= b.topic == telemetry::Topic::Meta;
    if (meta) break;
  }

  const json state = call({{"cmd", "get_state"}});
  ASSERT_TRUE(state["ok"].get<bool>()) << state.dump();
  const json& s = state["state"];
  EXPECT_EQ(s["backend"], GetParam());
  ASSERT_TRUE(s["placement"].is_array());
  // An expert device and the expert it holds in block 0.
  std::int32_t from = -1, expert = -1, to = -1;
  for (std::size_t e = 0; e < s["placement"][0].size() && expert < 0; ++e) {
    from = s["placement"][0][e][0].get<std::int32_t>();
    expert = static_cast<std::int32_t>(e);
  }
  for (const json& d : s["devices"])
    if (d["rank"] == -1 && d["index"] != from) to = d["index"].get<std::int32_t>();
  ASSERT_GE(to, 0);

  const std::vector<json> commands = {
      {{"cmd", "record_start"}, {"path", trace_name}},
      {{"cmd", "set_policy"}, {"params", {{"scheduler", "mtfs"}}}},
      {{"cmd", "set_microbatches"}, {"m", 3}},
      {{"cmd", "set_policy"}, {"policy", "pingpong"}},
      {{"cmd", "move_expert"}, {"block", 0}, {"expert", expert}, {"from", from}, {"to", to}},
      {{"cmd", "replicate_expert"}, {"block", 1}, {"expert", expert}, {"to", to}},
      {{"cmd", "set_placement"}, {"placement", s["placement"]}},
      {{"cmd", "set_policy"}, {"policy", "async"}, {"params", {{"scheduler", "defrag"}, {"lookahead", 4}}}},
      {{"cmd", "pause"}},
      {{"cmd", "resume"}},
      {{"cmd", "set_workload"}, {"rate", 20}, {"skew", "exp:1"}},
      {{"cmd", "record_stop"}},
  };
  for (const json& command : commands) {
    // The commands themselves take milliseconds: record a second of serving before stopping.
    if (command["cmd"] == "record_stop") std::this_thread::sleep_for(std::chrono::seconds(1));
    const json reply = call(command);
    EXPECT_TRUE(reply.value("ok", false)) << command.dump() << " -> " << reply.dump();
  }
  // Placement changes that copied weights were answered as pending: wait for their switch.
  json after = call({{"cmd", "get_state"}})["state"];
  for (const auto waiting = Clock::now();
       (after["weights"]["staged"] == true || after["switching"] == true) && Clock::now() - waiting < std::chrono::seconds(20);
       after = call({{"cmd", "get_state"}})["state"])
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(after["policy"]["name"], "async");
  EXPECT_EQ(after["policy"]["lookahead"], 4);
  EXPECT_EQ(after["policy"]["microbatches"], 3);
  EXPECT_EQ(after["placement"], s["placement"]);
  EXPECT_EQ(after["workload"]["rate"], 20.0);
  EXPECT_EQ(after["admission_paused"], false);
  EXPECT_TRUE(after["recording"].is_null());

  // The stream carried one control event per command, in order.
  std::vector<std::string> streamed;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (streamed.size() < commands.size() && Clock::now() < deadline) {
    for (const auto& b : (*sub)->poll(std::chrono::milliseconds(50))) {
      if (b.topic != telemetry::Topic::Control) continue;
      for (const json& e : json::parse(b.json)) {
        EXPECT_TRUE(e["ok"].get<bool>()) << e.dump();
        // A placement change that copied weights reports its switch a second time.
        if (e.value("phase", "") != "applied") streamed.push_back(e["cmd"].get<std::string>());
      }
    }
  }
  std::vector<std::string> expected;
  for (const json& c : commands) expected.push_back(c["cmd"]);
  EXPECT_EQ(streamed, expected);

  // The recording holds every command from record_start up to (not including) record_stop.
  auto reader = telemetry::TraceReader::open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto events = (*reader)->control_events();
  ASSERT_TRUE(events.ok());
  std::vector<std::string> recorded;
  for (const std::string& text : *events) {
    const json e = json::parse(text);
    if (e.value("phase", "") != "applied") recorded.push_back(e["cmd"]);
  }
  expected.pop_back();
  EXPECT_EQ(recorded, expected);
  auto spans = (*reader)->spans();
  ASSERT_TRUE(spans.ok());
  EXPECT_GT(spans->size(), 0u);
  // The per-second lines said that the policy and the placement changed.
  EXPECT_FALSE(demo.wait_for("policy [a-z/ =0-9]+\u2192[a-z/ =0-9]+").empty()) << demo.output();
  EXPECT_FALSE(demo.wait_for("placement v[2-9]").empty()) << demo.output();
  demo.stop(SIGINT);
  fs::remove_all(cache);
  fs::remove_all(record_dir);
}

INSTANTIATE_TEST_SUITE_P(Backends, DemoCommands, ::testing::Values("sim", "cpu"),
                         [](const auto& p) { return p.param; });

TEST(DemoLive, RecordingKilledWithSigkillOpens) {
  const fs::path trace = temp_path("killed.db");
  fs::remove(trace);
  DemoProcess demo(demo_args("sim", {"--record", trace.string(), "--pace", "0"}));
  ASSERT_FALSE(endpoints_of(demo).telemetry.empty()) << demo.output();
  // Wait until committed spans are in the file, then kill without warning.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  std::size_t seen = 0;
  while (seen < 10000 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto reader = telemetry::TraceReader::open(trace);
    if (!reader.ok()) continue;
    auto spans = (*reader)->spans();
    if (spans.ok()) seen = spans->size();
  }
  ASSERT_GE(seen, 10000u) << demo.output();
  const int status = demo.stop(SIGKILL);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  auto reader = telemetry::TraceReader::open(trace);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto spans = (*reader)->spans();
  ASSERT_TRUE(spans.ok()) << spans.status().message();
  EXPECT_GE(spans->size(), seen);
  // And the sqlite3 shell, as an operator would open it.
  const std::string cmd =
      "sqlite3 " + trace.string() + " 'PRAGMA integrity_check; SELECT SUM(count) > 0 FROM SPAN_BLOCKS;' 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 256> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int rc = pclose(pipe);
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 127) GTEST_SKIP() << "no sqlite3 shell: " << out;
  EXPECT_EQ(out, "ok\n1\n");
  fs::remove(trace);
  fs::remove(trace.string() + "-wal");
  fs::remove(trace.string() + "-shm");
}

TEST(DemoLive, PrometheusServesTheServingMetrics) {
  DemoProcess demo(demo_args("sim", {"--metrics", "127.0.0.1:0"}));
  const std::string port = demo.wait_for("metrics http://127\\.0\\.0\\.1:([0-9]+)/metrics");
  ASSERT_FALSE(port.empty()) << demo.output();
  httplib::Client client("127.0.0.1", std::stoi(port));
  client.set_read_timeout(5, 0);
  std::string body;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  // Wait for a summary window with tokens in it.
  while (Clock::now() < deadline) {
    auto res = client.Get("/metrics");
    if (res && res->status == 200) {
      body = res->body;
      if (body.find("switchyard_generation_tokens_per_second ") != std::string::npos &&
          body.find("switchyard_generation_tokens_per_second 0\n") == std::string::npos)
        break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (const char* metric : {"switchyard_requests_running", "switchyard_requests_waiting",
                             "switchyard_generation_tokens_per_second", "switchyard_inter_token_latency_seconds_bucket",
                             "switchyard_time_to_first_token_seconds_bucket", "switchyard_kv_cache_usage_ratio",
                             "switchyard_queue_depth_tokens", "switchyard_device_stall_ratio",
                             "switchyard_expert_load_imbalance"})
    EXPECT_NE(body.find(metric), std::string::npos) << metric << " missing from:\n" << body.substr(0, 2000);
  EXPECT_EQ(body.find("switchyard_generation_tokens_per_second 0\n"), std::string::npos);
}

}  // namespace
}  // namespace sy

namespace sy {
namespace {

TEST(DemoLive, ListeningBeyondLoopbackNeedsKeysOrInsecure) {
  {
    DemoProcess demo({"demo", "--duration", "5", "--telemetry", "tcp://0.0.0.0:0", "--control", "tcp://127.0.0.1:0",
                      "--no-console"});
    const std::string refusal = demo.wait_for("(refusing to listen for telemetry on tcp://0\\.0\\.0\\.0:0[^\\n]*)");
    EXPECT_NE(refusal.find("--keys DIR"), std::string::npos) << demo.output();
    const int status = demo.stop(0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << demo.output();
  }
  {
    DemoProcess demo({"demo", "--duration", "30", "--telemetry", "tcp://0.0.0.0:0", "--control", "tcp://127.0.0.1:0",
                      "--no-console", "--insecure"});
    EXPECT_FALSE(demo.wait_for("telemetry (tcp://[0-9.*]+:[0-9]+)").empty()) << demo.output();
  }
}

TEST(DemoLive, CurveKeysAdmitOnlyTheAuthorisedClient) {
  const fs::path keys = temp_path("keys");
  fs::remove_all(keys);
  {
    DemoProcess gen({"keys", "--out", keys.string()});
    const int status = gen.stop(0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << gen.output();
  }
  DemoProcess demo({"demo", "--duration", "60", "--telemetry", "tcp://0.0.0.0:0", "--control", "tcp://0.0.0.0:0",
                    "--no-console", "--keys", keys.string()});
  const std::string telemetry_port = demo.wait_for("telemetry tcp://[0-9.*]+:([0-9]+)");
  const std::string control_port = demo.wait_for("control tcp://[0-9.*]+:([0-9]+)");
  ASSERT_FALSE(telemetry_port.empty() || control_port.empty()) << demo.output();
  auto client = telemetry::load_client_keys(keys);
  ASSERT_TRUE(client.ok()) << client.status().message();

  auto with_key = telemetry::Subscriber::connect("tcp://127.0.0.1:" + telemetry_port, &*client);
  auto without_key = telemetry::Subscriber::connect("tcp://127.0.0.1:" + telemetry_port);
  ASSERT_TRUE(with_key.ok() && without_key.ok());
  std::size_t keyed = 0, unkeyed = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  while (Clock::now() < deadline) {
    keyed += (*with_key)->poll(std::chrono::milliseconds(20)).size();
    unkeyed += (*without_key)->poll(std::chrono::milliseconds(1)).size();
  }
  EXPECT_GT(keyed, 0u);
  EXPECT_EQ(unkeyed, 0u);

  auto control = telemetry::ControlClient::connect("tcp://127.0.0.1:" + control_port, &*client);
  auto stranger = telemetry::ControlClient::connect("tcp://127.0.0.1:" + control_port);
  ASSERT_TRUE(control.ok() && stranger.ok());
  auto reply = (*control)->call(R"({"cmd":"pause"})", std::chrono::seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  EXPECT_NE(reply->find("\"ok\":true"), std::string::npos) << *reply;
  // A client without the key gets no connection, hence no reply and no effect.
  auto refused = (*stranger)->call(R"({"cmd":"resume"})", std::chrono::seconds(2));
  EXPECT_FALSE(refused.ok());
  auto state = (*control)->call(R"({"cmd":"get_state"})", std::chrono::seconds(10));
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(nlohmann::json::parse(*state)["state"]["admission_paused"].get<bool>());
  demo.stop(SIGINT);
  fs::remove_all(keys);
}

}  // namespace
}  // namespace sy
