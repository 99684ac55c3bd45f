// `switchyard demo`: a live cluster serving a skewed Poisson workload until interrupted. By
// default a paced sim cluster (8 simulated H100s, Mixtral-8x7B's shape, async/defrag); with
// --backend cpu the tiny real model on virtual devices. Streams telemetry, answers control
// commands, opens the console where there is a display, and prints a summary line per second.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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
#include "engine/cli/live_telemetry.h"
#include "engine/cli/serve_options.h"
#include "engine/model/random_model.h"
#include "engine/sim/skew_router.h"
#include "engine/serving/workload.h"

extern char** environ;

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
  TelemetryFlags live;
  bool console = false;
  bool no_console = false;
};

// Metrics older than this are dropped: the demo runs for days in bounded memory.
constexpr std::int64_t kHistoryNs = 60'000'000'000;

// The console binary: next to this executable (build tree, install prefix), else on PATH.
std::string console_binary() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto next_to = self.parent_path() / "switchyard-console";
    if (std::filesystem::exists(next_to, ec)) return next_to.string();
  }
  if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    for (std::size_t start = 0; start <= dirs.size();) {
      const std::size_t end = std::min(dirs.find(':', start), dirs.size());
      const auto candidate = std::filesystem::path(dirs.substr(start, end - start)) / "switchyard-console";
      if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
      start = end + 1;
    }
  }
  return {};
}

bool have_display() {
  const char* x = std::getenv("DISPLAY");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  return (x && *x) || (wayland && *wayland);
}

// The console, started by the demo and stopped with it.
class ConsoleProcess {
 public:
  ConsoleProcess(const std::string& binary, const std::string& telemetry, const std::string& control) {
    std::vector<std::string> args = {binary, "--connect", telemetry, "--control", control};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, binary.c_str(), nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
  }
  ~ConsoleProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
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

  DeploymentOptions options = a.serve.deployment_options(layout, {}, a.skew, a.seed);
  options.clock = backend.clock();
  options.pace = a.pace;
  options.coordinator.keep_finished = false;  // runs for days: finished requests are dropped
  auto d = backend.deploy(Topology::from_layout(layout, c), options);
  Coordinator& co = d->coordinator();
  EventLoop& loop = d->loop();

  WorkloadSpec spec;
  spec.length_class = take(parse_length_class(a.workload));
  spec.rate_per_s = a.rate;
  spec.duration_s = 1.0;
  spec.vocab_size = c.vocab_size;
  check(validate_workload(spec));

  std::unique_ptr<LiveTelemetry> live = LiveTelemetry::start(a.live);
  if (live) {
    RunInfo info = backend.run_info();
    info.workload = {{"rate", a.rate}, {"skew", a.skew}, {"length_class", a.workload}};
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
        if (!d->options().skew_routing)
          return Status::Error("this run routes with the model's own router; start the demo with --skew to change it live");
        lambda = *parsed;
      }
      SY_RETURN_IF_ERROR(validate_workload(next));
      spec = next;
      if (lambda) {
        d->options().skew_routing->set_lambda(*lambda);
        a.skew = skew;
      }
      return nlohmann::json{{"rate", spec.rate_per_s}, {"skew", a.skew}, {"length_class", a.workload}};
    };
    live->attach(*d, std::move(info), std::move(hooks));
  }

  std::printf("model %s (%s, %d blocks, %d experts, top-%d), layout %s\n%s, policy %s\n", backend.model_name().c_str(),
              arch_name(c.arch).c_str(), c.num_layers, c.num_experts, c.top_k, layout.name.c_str(),
              backend.describe(layout.num_devices()).c_str(), options.policy.describe().c_str());
  std::printf("workload %s, Poisson %.1f req/s, skew %s; %s, %s\n\n", a.workload.c_str(), a.rate,
              a.skew.empty() ? "none (model router)" : a.skew.c_str(),
              options.clock == Clock::Wall ? "real time (wall clock)"
              : a.pace > 0                 ? ("paced at " + std::to_string(a.pace).substr(0, 4) + "× real time").c_str()
                                           : "unpaced",
              a.duration > 0 ? ("for " + std::to_string(a.duration).substr(0, 6) + " s").c_str() : "until Ctrl-C");
  if (live) std::printf("%s\n", live->describe().c_str());

  // The console where there is a display (or when asked), else the printed summary below.
  std::unique_ptr<ConsoleProcess> console;
  const bool want_console = !a.no_console && (a.console || have_display());
  if (want_console) {
    const std::string binary = console_binary();
    if (!live || live->telemetry_endpoint().empty() || live->control_endpoint().empty()) {
      if (a.console) throw CommandError{"--console needs the telemetry stream and control socket (drop --no-telemetry)"};
    } else if (!have_display()) {
      if (a.console) throw CommandError{"--console: no display (DISPLAY and WAYLAND_DISPLAY are unset)"};
    } else if (binary.empty()) {
      if (a.console) throw CommandError{"--console: switchyard-console is neither next to switchyard nor on PATH"};
      std::printf("(no switchyard-console found: running without the console)\n");
    } else {
      console = std::make_unique<ConsoleProcess>(binary, live->telemetry_endpoint(), live->control_endpoint());
      std::printf("%s\n", console->started() ? ("console: " + binary).c_str() : "could not start the console");
    }
  } else if (!have_display()) {
    std::printf("no display: running headless with a live summary\n");
  }
  std::printf("\n");

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
    d->metrics().forget_before(second * kSecond - kHistoryNs);
    loop.post((second + 1) * kSecond, [&report, second] { report(second + 1); });
  };
  loop.post(0, [&feed] { feed(0); });
  loop.post(kSecond, [&report] { report(1); });

  g_interrupted = false;
  auto previous = std::signal(SIGINT, on_sigint);
  loop.run([&] { return g_interrupted.load() || (end_ns >= 0 && loop.now() >= end_ns); });
  std::signal(SIGINT, previous);

  if (live) live->detach();
  const std::int64_t from = std::max<std::int64_t>(0, loop.now() - kHistoryNs);
  const MetricsReport total = d->metrics().report(from, loop.now());
  std::printf("\n%s: %.1f s of cluster time in %.1f s wall (%.3g× real time); the last %.0f s:\n%s",
              g_interrupted ? "interrupted" : "done", static_cast<double>(loop.now()) * 1e-9, wall(),
              wall() > 0 ? static_cast<double>(loop.now()) * 1e-9 / wall() : 0.0,
              static_cast<double>(loop.now() - from) * 1e-9, format_table(total).c_str());
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
  args->live.add_to(*sub, /*default_on=*/true);
  auto* console = sub->add_flag("--console", args->console,
                                "Open the console (default where there is a display and switchyard-console exists)");
  sub->add_flag("--no-console", args->no_console, "Never open the console")->excludes(console);
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
