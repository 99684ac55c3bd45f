// `switchyard demo`: a live cluster serving a skewed Poisson workload until interrupted. By
// default a paced sim cluster (8 simulated H100s, Mixtral-8x7B's shape, async/defrag); with
// --backend cpu the tiny real model on virtual devices. Streams telemetry, answers control
// commands, opens the console where there is a display, and prints a summary line per second.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/cli/backend_options.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/cli/live_service.h"
#include "engine/cli/number_validators.h"
#include "engine/model/random_model.h"
#include "engine/sim/skew_router.h"
#include "engine/text/model_tokenizer.h"
#include "engine/serving/workload.h"

namespace sy::cli {
namespace {

struct DemoArgs {
  std::string model;
  ServeOptions serve;
  BackendOptions backend;
  std::string workload = "short";
  std::int32_t shared_prefix = 0;
  double rate = 0;  // 0: the backend's default
  std::string skew = "exp:0.5";
  double duration = 0;  // 0: until interrupted
  double pace = 1.0;
  std::uint64_t seed = 0;
  TelemetryFlags live;
  ConsoleFlags console;
};

std::filesystem::path default_demo_model_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::filesystem::path(xdg) / "switchyard" / "demo-mixtral-tiny";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "switchyard" / "demo-mixtral-tiny";
  return std::filesystem::temp_directory_path() / "switchyard-demo-mixtral-tiny";
}

std::string tiny_demo_model() {
  const std::filesystem::path dir = default_demo_model_dir();
  // A model cached before the tokenizer existed is made again, so the demo can serve text.
  if (!std::filesystem::exists(dir / "config.json") || !std::filesystem::exists(dir / "tokenizer.json")) {
    std::filesystem::create_directories(dir.parent_path());
    // Ranks of a launched demo on one node make it at the same time: each writes its own copy
    // and renames it into place, and whoever comes second keeps the first one's.
    const std::filesystem::path staging = dir.string() + ".tmp-" + std::to_string(::getpid());
    ModelConfig config = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::BF16);
    const std::vector<ModelFile> tokenizer_files = take(text::model_tokenizer_files(config));
    check(write_random_model(config, /*seed=*/0, staging, 2ull << 30, tokenizer_files));
    std::error_code ec;
    if (!std::filesystem::exists(dir / "tokenizer.json", ec)) std::filesystem::remove_all(dir, ec);  // made before tokenizers
    std::filesystem::rename(staging, dir, ec);
    if (ec) {
      std::filesystem::remove_all(staging, ec);
    } else {
      std::printf("created the tiny demo model in %s\n", dir.string().c_str());
    }
  }
  return dir.string();
}

void run(DemoArgs a) {
  if (a.model.empty()) a.model = a.backend.backend == "sim" ? "mixtral-8x7b" : tiny_demo_model();
  if (a.serve.layout.empty()) {
    a.serve.layout = a.backend.backend == "sim" ? "disaggregated:4+4" : "disaggregated:2+4";
    // On its own cluster the engine picks the policy by the load it sees (with the thresholds
    // calibrated there it keeps sync, which served the most at 8 of 10 loads of the README's
    // sweep). A layout file keeps its own [policy].
    if (a.serve.policy.empty()) a.serve.policy = "adaptive";
  }
  if (a.rate <= 0) a.rate = a.backend.backend == "sim" ? 60 : 40;
  const std::string identity = "demo workload=" + a.workload + " rate=" + std::to_string(a.rate) + " skew=" + a.skew +
                               " seed=" + std::to_string(a.seed) + " duration=" + std::to_string(a.duration);
  LiveService service({a.model, a.serve, a.backend, a.live, a.console, a.skew, a.seed, a.pace, identity});
  if (service.worker_rank()) {  // rank 0 runs the workload
    service.start({}, {}, {});
    service.run(-1);
    return;
  }
  Deployment& d = service.deployment();
  Coordinator& co = d.coordinator();
  EventLoop& loop = d.loop();

  WorkloadSpec spec;
  spec.length_class = take(parse_length_class(a.workload));
  spec.rate_per_s = a.rate;
  spec.duration_s = 1.0;
  spec.vocab_size = service.backend().config().vocab_size;
  spec.shared_prefix = a.shared_prefix;
  check(validate_workload(spec));

  ControlCommands::Hooks hooks;
  // set_workload changes the arrival rate from the next second on, and the routing skew at once.
  hooks.set_workload = [&spec, &d, &a](const nlohmann::json& cmd) -> StatusOr<nlohmann::json> {
    for (const auto& [key, value] : cmd.items()) {
      (void)value;
      if (key != "cmd" && key != "rate" && key != "skew")
        return Status::Error("unknown field '" + key + "' (it takes rate, skew)");
    }
    WorkloadSpec next = spec;
    std::string skew = a.skew;
    if (cmd.contains("rate")) {
      const auto& r = cmd.at("rate");
      if (!r.is_number() || !(r.get<double>() > 0) || r.get<double>() > 1e6)
        return Status::Error("'rate' must be a number of requests per second in (0, 1e6], got " + r.dump());
      next.rate_per_s = r.get<double>();
    }
    std::optional<double> lambda;
    if (cmd.contains("skew")) {
      if (!cmd.at("skew").is_string()) return Status::Error("'skew' must be a string exp:λ, got " + cmd.at("skew").dump());
      skew = cmd.at("skew").get<std::string>();
      auto parsed = parse_skew(skew);
      if (!parsed.ok()) return parsed.status();
      if (!d.options().skew_routing)
        return Status::Error("this run routes with the model's own router; start the demo with --skew to change it live");
      lambda = *parsed;
    }
    SY_RETURN_IF_ERROR(validate_workload(next));
    spec = next;
    if (lambda) {
      d.options().skew_routing->set_lambda(*lambda);
      a.skew = skew;
    }
    return nlohmann::json{{"rate", spec.rate_per_s}, {"skew", a.skew}, {"length_class", a.workload}};
  };
  const Clock clock = service.backend().clock();
  char line[256];
  std::snprintf(line, sizeof line, "workload %s, Poisson %.1f req/s, skew %s; %s, %s", a.workload.c_str(), a.rate,
                a.skew.empty() ? (service.backend().sim() ? "none (uniform routing)" : "none (the model's router)")
                                : a.skew.c_str(),
                clock == Clock::Wall ? "real time (wall clock)"
                : a.pace > 0         ? ("paced at " + std::to_string(a.pace).substr(0, 4) + "× real time").c_str()
                                     : "unpaced",
                a.duration > 0 ? ("for " + std::to_string(a.duration).substr(0, 6) + " s").c_str() : "until Ctrl-C");
  service.start({{"rate", a.rate}, {"skew", a.skew}, {"length_class", a.workload}}, std::move(hooks), {line});

  constexpr std::int64_t kSecond = 1'000'000'000;
  const std::int64_t end_ns = a.duration > 0 ? static_cast<std::int64_t>(a.duration * 1e9) : -1;
  std::int64_t next_id = 0;
  // Open-loop arrivals, one second at a time, so the run needs no end.
  std::function<void(std::int64_t)> feed = [&](std::int64_t second) {
    if (end_ns >= 0 && second * kSecond >= end_ns) return;
    WorkloadSpec s = spec;
    s.seed = a.seed * 1'000'003 + static_cast<std::uint64_t>(second);
    std::vector<RequestSpec> batch = generate_workload(s);
    for (RequestSpec& r : batch) {
      r.id = next_id++;
      r.external_id = std::to_string(r.id);
      r.arrival_ns += second * kSecond;
      co.submit(std::move(r));
    }
    loop.post((second + 1) * kSecond, [&feed, second] { feed(second + 1); });
  };
  loop.post(0, [&feed] { feed(0); });
  service.run(end_ns);
  if (!service.failure().empty()) throw CommandError{"the deployment stopped: " + service.failure()};
}

}  // namespace

void register_demo(CLI::App& app) {
  auto args = std::make_shared<DemoArgs>();
  CLI::App* sub = app.add_subcommand(
      "demo", "A live cluster serving a skewed Poisson workload until Ctrl-C (default: paced sim of 8 H100s)");
  sub->add_option("--model", args->model,
                  "Model (sim default: mixtral-8x7b from assets/models; cpu default: the tiny demo model)");
  args->serve.add_to(*sub, /*layout_required=*/false);
  args->backend.backend = "sim";
  args->backend.add_to(*sub);
  sub->add_option("--workload", args->workload, "Length class")
      ->check(CLI::IsMember({"short", "medium", "reasonable"}))->capture_default_str();
  sub->add_option("--shared-prefix", args->shared_prefix,
                  "Every prompt begins with the same N tokens (a system prompt) before its drawn ones: what "
                  "--prefix-caching serves")
      ->check(CLI::Range(0, kMaxSharedPrefix))->capture_default_str();
  sub->add_option("--rate", args->rate, "Arrivals per second (default, or 0: 60 on sim, 40 on cpu)")
      ->check(non_negative_number());
  sub->add_option("--skew", args->skew, "Routing skew exp:λ; empty for the model's router (cpu)")->capture_default_str();
  sub->add_option("--duration", args->duration, "Seconds of cluster time to run (0: until Ctrl-C)")
      ->check(non_negative_number())->capture_default_str();
  sub->add_option("--pace", args->pace, "Cluster seconds per wall second (0: as fast as possible)")
      ->check(non_negative_number())->capture_default_str();
  sub->add_option("--seed", args->seed, "Workload seed")->capture_default_str();
  args->live.add_to(*sub, /*default_on=*/true);
  args->console.add_to(*sub);
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
