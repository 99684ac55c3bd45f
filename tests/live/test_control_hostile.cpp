// Hostile input on the control socket while the cpu backend serves real requests: garbage bytes,
// wrong types, unknown commands, oversized and multi-frame messages, and commands with bad
// arguments are all answered with errors, and every request's tokens are identical to those of
// an undisturbed run.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include <zmq.hpp>

#include "engine/cli/live_telemetry.h"
#include "engine/model/random_model.h"
#include "engine/cpu/cpu_deployment.h"
#include "telemetry/control_client.h"

namespace sy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ControlHostile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("sy_test_hostile_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ModelConfig c = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32);
    ASSERT_TRUE(write_random_model(c, 5, dir_).ok());
    auto w = ModelWeights::load(dir_);
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = *w;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  std::vector<RequestSpec> requests() const {
    std::mt19937_64 rng(9);
    std::vector<RequestSpec> out;
    for (std::int32_t i = 0; i < 48; ++i) {
      RequestSpec r;
      r.id = i;
      r.external_id = std::to_string(i);
      r.arrival_ns = static_cast<std::int64_t>(rng() % 20'000'000);
      r.prompt.resize(4 + rng() % 20);
      for (auto& t : r.prompt) t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(weights_->config().vocab_size));
      r.max_new_tokens = 8 + static_cast<std::int32_t>(rng() % 24);
      out.push_back(std::move(r));
    }
    return out;
  }

  // Serves the requests under async on a disaggregated layout; with a control socket when
  // `live` is given. Returns every request's output.
  std::vector<std::vector<std::int32_t>> serve(cli::LiveTelemetry* live) {
    DeploymentOptions o;
    o.skew_lambda = 0.5;  // routing from the skew model: identical whatever the batch composition
    o.kv_pages_per_rank = 1024;
    o.page_size = 8;
    o.link = LinkModel{5'000, 10.0};
    // Executions last what a fixed model says, so that both runs batch exactly alike.
    o.cost_model = std::make_shared<LinearCostModel>(20'000, 1'000);
    CpuDeployment d(weights_, Topology::disaggregated(weights_->config(), 2, 3), o);
    d.submit(requests());
    if (live) {
      RunInfo info;
      info.backend = "cpu";
      info.model = weights_->config();
      live->attach(d, info, {});
    }
    d.run();
    if (live) live->detach();
    std::vector<std::vector<std::int32_t>> out;
    for (const RequestRecord& r : d.coordinator().requests()) out.push_back(r.output);
    return out;
  }

  static fs::path dir_;
  static std::shared_ptr<const ModelWeights> weights_;
};
fs::path ControlHostile::dir_;
std::shared_ptr<const ModelWeights> ControlHostile::weights_;

TEST_F(ControlHostile, GarbageWhileServingLeavesEveryTokenAsItWas) {
  const auto undisturbed = serve(nullptr);

  cli::TelemetryFlags flags;
  flags.telemetry = "tcp://127.0.0.1:0";
  flags.control = "tcp://127.0.0.1:0";
  auto live = cli::LiveTelemetry::start(flags);
  ASSERT_TRUE(live);
  const std::string endpoint = live->control_endpoint();

  std::atomic<bool> stop{false};
  std::atomic<int> errors{0}, replies{0}, unexpected{0};
  std::thread attacker([&] {
    // Raw DEALER for what ControlClient would never send: several frames, empty frames.
    zmq::context_t ctx;
    zmq::socket_t raw(ctx, zmq::socket_type::dealer);
    raw.set(zmq::sockopt::rcvtimeo, 2000);
    raw.set(zmq::sockopt::linger, 0);
    raw.connect(endpoint);
    auto client = telemetry::ControlClient::connect(endpoint);
    if (!client.ok()) return;
    std::mt19937_64 rng(1);
    const std::vector<std::string> hostile = {
        "garbage",
        "",
        "{",
        "[1,2,3]",
        "null",
        "{\"cmd\":42}",
        "{\"cmd\":\"\"}",
        "{\"cmd\":\"shutdown\"}",
        "{\"command\":\"get_state\"}",
        "{\"cmd\":\"set_policy\",\"policy\":[\"async\"]}",
        "{\"cmd\":\"set_policy\",\"params\":{\"decay\":\"high\"}}",
        "{\"cmd\":\"set_microbatches\",\"m\":1e9}",
        "{\"cmd\":\"set_microbatches\",\"m\":-3}",
        "{\"cmd\":\"get_state\",\"x\":1e400}",  // once aborted the engine
        "{\"cmd\":\"set_microbatches\",\"m\":-1e99999}",
        "{\"cmd\":\"move_expert\",\"expert\":0,\"from\":0,\"to\":99999999999}",
        "{\"cmd\":\"move_expert\",\"expert\":0,\"from\":1,\"to\":1}",
        "{\"cmd\":\"replicate_expert\",\"expert\":-1,\"to\":2}",
        "{\"cmd\":\"set_placement\",\"placement\":[[[]]]}",
        "{\"cmd\":\"set_placement\",\"placement\":{\"a\":1}}",
        "{\"cmd\":\"record_start\",\"path\":\"/proc/nope/x.db\"}",
        "{\"cmd\":\"record_stop\"}",
        "{\"cmd\":\"set_workload\",\"rate\":1}",
        "{\"cmd\":\"get_state\",\"verbose\":true}",
        std::string(2 * 1024 * 1024, 'x'),
        "{\"cmd\":\"get_state\",\"pad\":\"" + std::string(100 * 1024, 'a') + "\"}",
        std::string("\xff\xfe\x00\x01{\"cmd\":\"pause\"}", 19),
        std::string(100, '[') + std::string(100, ']'),
        "{\"cmd\":\"get_state\"}",  // valid, read-only
    };
    while (!stop) {
      for (const std::string& h : hostile) {
        if (stop) break;
        auto r = (*client)->call(h, std::chrono::milliseconds(5000));
        if (!r.ok()) continue;
        ++replies;
        const json reply = json::parse(*r, nullptr, false);
        if (reply.is_discarded() || !reply.contains("ok")) {
          ++unexpected;
        } else if (!reply["ok"].get<bool>()) {
          ++errors;
        } else if (h != "{\"cmd\":\"get_state\"}") {
          ++unexpected;  // only the read-only command may succeed
        }
      }
      // A multi-frame message and random bytes.
      raw.send(zmq::buffer(std::string("{\"cmd\":\"pause\"}")), zmq::send_flags::sndmore);
      raw.send(zmq::buffer(std::string("{\"cmd\":\"pause\"}")), zmq::send_flags::none);
      std::string noise(1 + rng() % 512, '\0');
      for (char& ch : noise) ch = static_cast<char>(rng());
      raw.send(zmq::buffer(noise), zmq::send_flags::none);
      zmq::message_t reply;
      while (raw.recv(reply, zmq::recv_flags::dontwait)) {
        const json j = json::parse(reply.to_string(), nullptr, false);
        if (j.is_discarded() || j.value("ok", true)) ++unexpected;
        ++errors;
      }
    }
  });
  // Serve twice under fire, so that the garbage certainly overlaps serving.
  const auto disturbed = serve(live.get());
  const auto disturbed_again = serve(live.get());
  stop = true;
  attacker.join();

  EXPECT_EQ(disturbed, undisturbed);
  EXPECT_EQ(disturbed_again, undisturbed);
  EXPECT_GT(replies.load(), 20);
  EXPECT_GT(errors.load(), 20);
  EXPECT_EQ(unexpected.load(), 0);
}

}  // namespace
}  // namespace sy
