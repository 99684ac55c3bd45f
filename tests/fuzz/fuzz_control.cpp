// Fuzzes the control endpoint's logic on a live simulated deployment: the input is a series of
// request bodies, one per line, each validated as the control server does and handed to the
// commands at successive run times while requests are served. Whatever the bytes: every command
// is answered exactly once with a boolean "ok", and every request still ends with all of its
// tokens (no change loses or duplicates one).
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/random_model.h"
#include "engine/serving/control_commands.h"
#include "engine/serving/telemetry_bridge.h"
#include "engine/sim/sim_deployment.h"
#include "telemetry/control_server.h"
#include "telemetry/recording_directory.h"
#include "telemetry/telemetry_hub.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::size_t kMaxCommands = 16;  // per input: more lines add time, not coverage
constexpr std::int64_t kCommandGapNs = 2'000'000;

struct Fixed {
  sy::ModelConfig config;
  sy::HardwareProfile hardware;
  fs::path record_dir;
  std::unique_ptr<sy::telemetry::RecordingDirectory> recordings;
  std::vector<sy::RequestSpec> requests;
};

Fixed& fixed() {
  static Fixed* f = [] {
    auto* x = new Fixed();
    x->config = sy::preset_config(sy::Arch::Mixtral, sy::ModelPreset::Tiny, sy::kernels::DType::BF16);
    x->config.num_layers = 2;
    x->config.sparse_layers.assign(2, true);
    x->config.num_experts = 4;
    x->config.top_k = 2;
    auto hw = sy::find_hardware_profile("h100");
    if (!hw.ok()) fuzz_fail("control", hw.status().message().c_str());
    x->hardware = *hw;
    x->record_dir = fs::temp_directory_path() / ("sy_fuzz_control_" + std::to_string(::getpid()));
    fs::remove_all(x->record_dir);
    auto dir = sy::telemetry::RecordingDirectory::open(x->record_dir);
    if (!dir.ok()) fuzz_fail("control", dir.status().message().c_str());
    x->recordings = std::make_unique<sy::telemetry::RecordingDirectory>(std::move(dir).value());
    sy::WorkloadSpec w;
    w.length_class = sy::LengthClass::Short;
    w.rate_per_s = 300;
    w.duration_s = 0.02;
    w.seed = 11;
    w.vocab_size = x->config.vocab_size;
    x->requests = sy::generate_workload(w);
    return x;
  }();
  return *f;
}

std::vector<std::string_view> lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty() && out.size() < kMaxCommands) {
    const std::size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Fixed& f = fixed();
  // A hub per input: it keeps every producer a bridge adds for its own lifetime.
  sy::telemetry::HubOptions ho;
  ho.endpoint = "tcp://127.0.0.1:0";
  auto hub = sy::telemetry::TelemetryHub::start(ho);
  if (!hub.ok()) fuzz_fail("control", hub.status().message().c_str());
  sy::DeploymentOptions o;
  o.skew_lambda = 0.5;
  o.link = sy::profile_links(f.hardware, 4);
  o.coordinator.max_batch_per_rank = 8;
  sy::SimDeployment deployment(f.config, f.hardware, sy::Topology::disaggregated(f.config, 2, 2), o);
  sy::RunInfo info;
  info.backend = "sim";
  info.model_name = "fuzz";
  info.model = f.config;
  sy::TelemetryBridge bridge(deployment, **hub, nullptr, info, sy::TelemetryBridge::Options{});
  // Recordings capped at 1 MiB: a fuzzer must not fill the disk.
  auto commands = std::make_unique<sy::ControlCommands>(deployment, bridge, **hub, sy::ControlCommands::Hooks{},
                                                        f.recordings.get(), std::uint64_t{1} << 20);
  deployment.submit(f.requests);

  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string_view> bodies = lines(text);
  std::vector<int> answers(bodies.size(), 0);
  const sy::telemetry::ControlServerOptions limits;
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    auto command = sy::telemetry::ControlServer::parse_request(bodies[i], limits);
    if (!command.ok()) {
      answers[i] = 1;  // the server answers the validation error itself
      continue;
    }
    deployment.loop().post(static_cast<std::int64_t>(i + 1) * kCommandGapNs,
                           [&commands, &answers, i, c = std::move(command).value()] {
                             commands->handle(c, [&answers, i](const json& reply) {
                               if (!reply.is_object() || !reply.contains("ok") || !reply["ok"].is_boolean())
                                 fuzz_fail("control", ("a reply without a boolean ok: " + reply.dump()).c_str());
                               ++answers[i];
                             });
                           });
  }
  // Past the last command, a paused admission would hold requests (and the periodic telemetry
  // samples would keep the loop going) forever: resume, as an operator would, and finish.
  deployment.loop().run_until(static_cast<std::int64_t>(bodies.size() + 1) * kCommandGapNs);
  deployment.coordinator().set_admission_paused(false);
  deployment.run();
  commands.reset();  // waits for a recording being closed
  for (std::size_t i = 0; i < answers.size(); ++i)
    if (answers[i] != 1)
      fuzz_fail("control", ("command " + std::to_string(i) + " answered " + std::to_string(answers[i]) + " times").c_str());
  const auto& records = deployment.coordinator().requests();
  if (records.size() != f.requests.size()) fuzz_fail("control", "requests went missing");
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i].state != sy::RequestState::Finished)
      fuzz_fail("control", ("request " + std::to_string(i) + " did not finish").c_str());
    if (static_cast<std::int32_t>(records[i].output.size()) != f.requests[i].max_new_tokens)
      fuzz_fail("control", ("request " + std::to_string(i) + " lost or duplicated tokens").c_str());
  }
  return 0;
}
