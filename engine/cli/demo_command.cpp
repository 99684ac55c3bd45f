// `switchyard demo`: a live cluster serving a skewed Poisson workload until interrupted. By
// default a paced sim cluster (8 simulated H100s, Mixtral-8x7B's shape, async/defrag); with
// --backend cpu the tiny real model on virtual devices. Prints a summary line per second.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/cli/backend_options.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/cli/serve_options.h"
#include "engine/model/random_model.h"
#include "engine/serving/workload.h"

namespace sy::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

struct DemoArgs {
  std::string model;
  ServeOptions serve;
  BackendOptions backend;
  std::string workload = "short";
  double rate = 0;  // 0: the backend's default
  std::string skew = "exp:0.5";
  double duration = 0;  // 0: until interrupted
  double pace = 1.0;
  std::uint64_t seed = 0;
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
  if (!std::filesystem::exists(dir / "config.json")) {
    std::filesystem::create_directories(dir.parent_path());
    const ModelConfig config = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::BF16);
    check(write_random_model(config, /*seed=*/0, dir));
    std::printf("created the tiny demo model in %s\n", dir.string().c_str());
  }
  return dir.string();
}

void print_window(const Deployment& d, Coordinator& co, const MetricsReport& r, double elapsed_wall) {
  std::int32_t running = 0;
  for (std::int32_t rank = 0; rank < const_cast<Deployment&>(d).cluster().topology().num_ranks(); ++rank)
    running += co.running(rank);
  std::printf("t=%7.1fs %9.0f tok/s  ITL p50 %6.2f p99 %7.2f ms  TTFT p50 %7.2f ms  running %4d waiting %4zu  busy",
              static_cast<double>(r.t_end_ns) * 1e-9, r.tokens_per_s, r.itl.p50_ms, r.itl.p99_ms, r.ttft.p50_ms,
              running, co.waiting());
  for (const DeviceUsage& u : r.devices) std::printf(" %s %3.0f%%", u.name.c_str(), 100 * u.busy);
  std::printf("  [%.1f s wall]\n", elapsed_wall);
  std::fflush(stdout);
}

void run(DemoArgs a) {
  if (a.model.empty()) a.model = a.backend.backend == "sim" ? "mixtral-8x7b" : tiny_demo_model();
  if (a.serve.layout.empty())
    a.serve.layout = a.backend.backend == "sim" ? "disaggregated:4+4" : "disaggregated:2+4";
  if (a.rate <= 0) a.rate = a.backend.backend == "sim" ? 60 : 40;
  const Backend backend = Backend::open(a.backend, a.model);
  const ModelConfig& c = backend.config();
  const Layout layout = a.serve.load(c);

  const DeploymentOptions options = a.serve.deployment_options(layout, {}, a.skew, a.seed);
  auto d = backend.deploy(Topology::from_layout(layout, c), options);
  Coordinator& co = d->coordinator();
  VirtualEventLoop& loop = d->loop();

  WorkloadSpec spec;
  spec.length_class = take(parse_length_class(a.workload));
  spec.rate_per_s = a.rate;
  spec.duration_s = 1.0;
  spec.vocab_size = c.vocab_size;
  check(validate_workload(spec));

  std::printf("model %s (%s, %d blocks, %d experts, top-%d), layout %s\n%s, policy %s\n", backend.model_name().c_str(),
              arch_name(c.arch).c_str(), c.num_layers, c.num_experts, c.top_k, layout.name.c_str(),
              backend.describe(layout.num_devices()).c_str(), options.policy.describe().c_str());
  std::printf("workload %s, Poisson %.1f req/s, skew %s; %s, %s\n\n", a.workload.c_str(), a.rate,
              a.skew.empty() ? "none (model router)" : a.skew.c_str(),
              a.pace > 0 ? ("paced at " + std::to_string(a.pace).substr(0, 4) + "× real time").c_str() : "unpaced",
              a.duration > 0 ? ("for " + std::to_string(a.duration).substr(0, 6) + " s").c_str() : "until Ctrl-C");

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
  const auto wall0 = std::chrono::steady_clock::now();
  const auto wall = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count(); };
  std::function<void(std::int64_t)> report = [&](std::int64_t second) {
    print_window(*d, co, d->metrics().report((second - 1) * kSecond, second * kSecond), wall());
    loop.post((second + 1) * kSecond, [&report, second] { report(second + 1); });
  };
  loop.post(0, [&feed] { feed(0); });
  loop.post(kSecond, [&report] { report(1); });

  g_interrupted = false;
  auto previous = std::signal(SIGINT, on_sigint);
  loop.set_pace(a.pace);
  loop.run([&] { return g_interrupted.load() || (end_ns >= 0 && loop.now() >= end_ns); });
  std::signal(SIGINT, previous);

  const MetricsReport total = d->metrics().report(0, loop.now());
  std::printf("\n%s: %.1f s of cluster time in %.1f s wall\n%s", g_interrupted ? "interrupted" : "done",
              static_cast<double>(loop.now()) * 1e-9, wall(), format_table(total).c_str());
  backend.finish();
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
  sub->add_option("--rate", args->rate, "Arrivals per second (default: 60 on sim, 40 on cpu)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--skew", args->skew, "Routing skew exp:λ; empty for the model's router (cpu)")->capture_default_str();
  sub->add_option("--duration", args->duration, "Seconds of cluster time to run (0: until Ctrl-C)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--pace", args->pace, "Cluster seconds per wall second (0: as fast as possible)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_option("--seed", args->seed, "Workload seed")->capture_default_str();
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
