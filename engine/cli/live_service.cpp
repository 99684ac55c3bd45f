#include "engine/cli/live_service.h"

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
#include <functional>

#include "engine/cli/cli_support.h"

extern char** environ;

namespace sy::cli {

// The console, started with the service and stopped with it.
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

namespace {

// Counted, not flagged: a second signal during a graceful shutdown ends it at once.
std::atomic<int> g_interrupts{0};
static_assert(std::atomic<int>::is_always_lock_free, "incremented in a signal handler");
extern "C" void on_interrupt(int) { g_interrupts.fetch_add(1); }

// Ctrl-C and SIGTERM count in g_interrupts while the service serves; the previous handlers return after.
class InterruptHandlers {
 public:
  InterruptHandlers() {
    g_interrupts = 0;
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &previous_int_);
    ::sigaction(SIGTERM, &action, &previous_term_);
  }
  ~InterruptHandlers() {
    ::sigaction(SIGINT, &previous_int_, nullptr);
    ::sigaction(SIGTERM, &previous_term_, nullptr);
  }
  InterruptHandlers(const InterruptHandlers&) = delete;
  InterruptHandlers& operator=(const InterruptHandlers&) = delete;

 private:
  struct sigaction previous_int_ {}, previous_term_{};
};

// Metrics older than this are dropped: a service runs for days in bounded memory.
constexpr std::int64_t kHistoryNs = 60'000'000'000;
constexpr std::int64_t kSecond = 1'000'000'000;

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

// The policy in a few words: "async/defrag", "pingpong m=3", "sync".
std::string policy_label(const RuntimePolicy& p) {
  std::string s = (p.adaptive ? "adaptive " : "") + policy_name(p.kind);
  if (p.kind == PolicyKind::Async) s += "/" + p.scheduler.name;
  if (p.kind == PolicyKind::PingPong) s += " m=" + std::to_string(p.microbatches);
  return s;
}

// What changed since the last summary line: the policy ("policy async/defrag→sync", with the
// count when it switched more than once) and the placement (numbered from v1 at the start;
// "v4 (3 changes)" when it changed several times in the second).
class ChangeWatch {
 public:
  explicit ChangeWatch(Deployment& d)
      : policy_(policy_label(d.coordinator().policy())), switches_(d.coordinator().policy_switches()),
        placements_(d.coordinator().placement_changes()),
        adaptive_(d.coordinator().adaptive_switches().size()) {}

  std::string changes(Deployment& d) {
    std::string out;
    const Coordinator& co = d.coordinator();
    const std::int64_t switches = co.policy_switches();
    if (switches != switches_) {
      const std::string now = policy_label(co.policy());
      out += "  policy " + policy_ + "\u2192" + now;
      if (switches - switches_ > 1) out += " (" + std::to_string(switches - switches_) + " switches)";
      policy_ = now;
      switches_ = switches;
    }
    // The adaptive policy says why it switched.
    if (co.adaptive_switches().size() != adaptive_) {
      adaptive_ = co.adaptive_switches().size();
      out += "  (adaptive: " + co.adaptive_switches().back().reason + ")";
    }
    const std::int64_t placements = co.placement_changes();
    if (placements != placements_) {
      out += "  placement v" + std::to_string(placements + 1);
      if (placements - placements_ > 1) out += " (" + std::to_string(placements - placements_) + " changes)";
      placements_ = placements;
    }
    return out;
  }

 private:
  std::string policy_;
  std::int64_t switches_;
  std::int64_t placements_;
  std::size_t adaptive_;
};

void print_window(Deployment& d, const MetricsReport& r, double elapsed_wall, const std::string& changes) {
  Coordinator& co = d.coordinator();
  std::int32_t running = 0;
  for (std::int32_t rank = 0; rank < d.cluster().topology().num_ranks(); ++rank) running += co.running(rank);
  std::printf("t=%7.1fs %9.0f tok/s  ITL p50 %6.2f p99 %7.2f ms  TTFT p50 %7.2f ms  running %4d waiting %4zu  busy",
              static_cast<double>(r.t_end_ns) * 1e-9, r.tokens_per_s, r.itl.p50_ms, r.itl.p99_ms, r.ttft.p50_ms,
              running, co.waiting());
  for (const DeviceUsage& u : r.devices) std::printf(" %s %3.0f%%", u.name.c_str(), 100 * u.busy);
  std::printf("  [%.1f s wall]%s\n", elapsed_wall, changes.c_str());
  std::fflush(stdout);
}

}  // namespace

void ConsoleFlags::add_to(CLI::App& app) {
  auto* c = app.add_flag("--console", console,
                         "Open the console (default where there is a display and switchyard-console exists)");
  app.add_flag("--no-console", no_console, "Never open the console")->excludes(c);
}

LiveService::LiveService(const Setup& setup) : setup_(setup), backend_(Backend::open(setup.backend, setup.model)) {
  const ModelConfig& c = backend_.config();
  layout_ = setup_.serve.load(c);
  options_ = setup_.serve.deployment_options(layout_, {}, setup_.skew, setup_.seed);
  options_.clock = backend_.clock();
  options_.pace = setup_.pace;
  options_.coordinator.keep_finished = false;  // runs for days: finished requests are dropped
  Topology topology = Topology::from_layout(layout_, c);
  // No request runs yet: the solver plans for a context of 256 positions; set_policy with
  // expert_chunks "auto" solves again for the requests running then.
  findep_choice_ = setup_.serve.resolve_findep(options_, *backend_.findep_costs(), topology, 256);
  const dist::RankEnvironment env = take(dist::RankEnvironment::from_process());
  if (env.distributed()) {
    if (backend_.sim())
      throw CommandError{"--backend sim runs in one process; ranks started by " + env.launcher + " serve --backend cpu"};
    if (options_.clock != Clock::Wall)
      throw CommandError{"--clock virtual runs in one process; ranks started by " + env.launcher + " need --clock wall"};
    ranks_ = take(dist::DistributedRun::join(env, layout_, setup_.model, setup_.identity, topology,
                                             backend_.device_links(layout_, topology, env)));
    ranks_->configure(options_, static_cast<std::int64_t>(c.hidden_size) * 4);
    std::fprintf(stderr, "%s\n", ranks_->describe(topology).c_str());
  }
  deployment_ = backend_.deploy(std::move(topology), options_);
  if (ranks_) ranks_->attach(*deployment_);
  // Only rank 0 has endpoints: the other ranks' events reach its telemetry through the relay.
  if (!worker_rank()) live_ = LiveTelemetry::start(setup_.live);
}

LiveService::~LiveService() = default;

void LiveService::start(nlohmann::json workload, ControlCommands::Hooks hooks, const std::vector<std::string>& lines) {
  const ModelConfig& c = backend_.config();
  if (worker_rank()) {
    std::printf("rank %d of %d: serving the workers of its devices until rank 0 ends the run\n", ranks_->rank(),
                ranks_->world());
    std::fflush(stdout);
    return;
  }
  if (live_) {
    RunInfo info = backend_.run_info();
    info.workload = std::move(workload);
    if (ranks_) info.processes = [this] { return ranks_->processes(); };
    live_->attach(*deployment_, std::move(info), std::move(hooks));
    if (ranks_)
      ranks_->on_rank_lost([this](std::int32_t rank, const std::string& why) { live_->bridge()->rank_lost(rank, why); });
  }
  std::printf("model %s (%s, %d blocks, %d experts, top-%d), layout %s\n%s, policy %s\n", backend_.model_name().c_str(),
              arch_name(c.arch).c_str(), c.num_layers, c.num_experts, c.top_k, layout_.name.c_str(),
              backend_.describe(layout_.num_devices()).c_str(), options_.policy.describe().c_str());
  for (const std::string& line : lines) std::printf("%s\n", line.c_str());
  if (!findep_choice_.empty()) std::printf("%s\n", findep_choice_.c_str());
  std::printf("\n");
  if (live_ && !live_->describe().empty()) std::printf("%s\n", live_->describe().c_str());

  // The console where there is a display (or when asked), else the printed summary below.
  const ConsoleFlags& cf = setup_.console;
  const bool want_console = !cf.no_console && (cf.console || have_display());
  if (want_console) {
    const std::string binary = console_binary();
    if (!live_ || live_->telemetry_endpoint().empty() || live_->control_endpoint().empty()) {
      if (cf.console) throw CommandError{"--console needs the telemetry stream and control socket (drop --no-telemetry)"};
    } else if (!have_display()) {
      if (cf.console) throw CommandError{"--console: no display (DISPLAY and WAYLAND_DISPLAY are unset)"};
    } else if (binary.empty()) {
      if (cf.console) throw CommandError{"--console: switchyard-console is neither next to switchyard nor on PATH"};
      std::printf("(no switchyard-console found: running without the console)\n");
    } else {
      console_ = std::make_unique<ConsoleProcess>(binary, live_->telemetry_endpoint(), live_->control_endpoint());
      std::printf("%s\n", console_->started() ? ("console: " + binary).c_str() : "could not start the console");
    }
  } else if (!have_display()) {
    std::printf("no display: running headless with a live summary\n");
  }
  std::printf("\n");
  std::fflush(stdout);
}

bool LiveService::serve_as_worker(double drain_timeout_s) {
  EventLoop& loop = deployment_->loop();
  // mpirun and Kubernetes signal every rank at once: rank 0 ends the run and tells this one,
  // so a signalled worker waits that long before it leaves on its own (then rank 0 sees it
  // die and stops the deployment with the reason); rank 0's graceful shutdown may take up to
  // its timeout first, and a second signal leaves at once.
  const std::int64_t grace_ns = 2 * kSecond + static_cast<std::int64_t>(drain_timeout_s * 1e9);
  std::int64_t signalled_at = -1;
  std::function<void()> tick = [&] {
    if (!ranks_->serving()) return;
    if (g_interrupts.load() > 0 && signalled_at < 0) signalled_at = loop.now();
    if (signalled_at >= 0 && (loop.now() - signalled_at >= grace_ns || g_interrupts.load() > 1)) {
      std::fprintf(stderr, "rank %d: interrupted, and rank 0 did not end the run: leaving\n", ranks_->rank());
      ranks_->leave();
      return;
    }
    loop.post(loop.now() + kSecond / 10, tick);
  };
  loop.post_now(tick);
  {
    const InterruptHandlers handlers;
    ranks_->serve(*deployment_);
  }
  backend_.finish();
  if (!ranks_->failure().empty()) throw CommandError{ranks_->failure()};
  return g_interrupts.load() > 0;
}

bool LiveService::run(std::int64_t end_ns, const std::function<void()>& stopping, const GracefulShutdown& drain) {
  if (worker_rank()) return serve_as_worker(drain.timeout_s);
  Deployment& d = *deployment_;
  EventLoop& loop = d.loop();
  const auto wall0 = std::chrono::steady_clock::now();
  const auto wall = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count(); };
  bool ending = false;
  double draining_since = -1;  // wall seconds; -1: not draining
  const auto failed = [&] { return ranks_ && !ranks_->failure().empty(); };
  // A dead rank ends the run too: its requests have failed with the reason already.
  const auto over = [&] { return g_interrupts.load() > 0 || (end_ns >= 0 && loop.now() >= end_ns) || failed(); };
  // After the first signal with a drain to do: the open requests' end, the timeout, a second
  // signal or a dead rank.
  const auto drained = [&] {
    return drain.done() || wall() - draining_since >= drain.timeout_s || g_interrupts.load() > 1 || failed();
  };
  ChangeWatch watch(d);
  // A summary line each second; a tick each 100 ms keeps the loop alive and notices a signal soon.
  std::function<void(std::int64_t)> tick = [&](std::int64_t n) {
    if (n > 0 && n % 10 == 0) {
      const std::int64_t second = n / 10;
      print_window(d, d.metrics().report((second - 1) * kSecond, second * kSecond), wall(), watch.changes(d));
      d.metrics().forget_before(second * kSecond - kHistoryNs);
    }
    if (!ending && draining_since < 0 && drain.timeout_s > 0 && g_interrupts.load() == 1 && !failed()) {
      draining_since = wall();
      drain.begin();
      if (!drain.done()) {  // else it ends at once, below
        std::printf("\nshutting down: no new requests; waiting up to %g s for %s (Ctrl-C again to stop now)\n",
                    drain.timeout_s, drain.what().c_str());
        std::fflush(stdout);
      }
    }
    if (!ending && (draining_since >= 0 ? drained() : over())) {
      ending = true;
      if (draining_since >= 0 && !drain.done()) {
        std::printf("shutting down: %s after %.1f s\n", drain.what().c_str(), wall() - draining_since);
        std::fflush(stdout);
      }
      if (stopping) stopping();
      return;
    }
    loop.post((n + 1) * kSecond / 10, [&tick, n] { tick(n + 1); });
  };
  loop.post(0, [&tick] { tick(0); });

  {
    const InterruptHandlers handlers;
    loop.run([&] { return ending; });
  }

  if (ranks_) ranks_->finish();  // the other ranks stop serving (unless one died: they already were told)
  if (live_) live_->detach();
  const std::int64_t from = std::max<std::int64_t>(0, loop.now() - kHistoryNs);
  const MetricsReport total = d.metrics().report(from, loop.now());
  const bool interrupted = g_interrupts.load() > 0;
  std::printf("\n%s: %.1f s of cluster time in %.1f s wall (%.3g× real time); the last %.0f s:\n%s",
              interrupted ? "interrupted" : failure().empty() ? "done" : "stopped", static_cast<double>(loop.now()) * 1e-9, wall(),
              wall() > 0 ? static_cast<double>(loop.now()) * 1e-9 / wall() : 0.0,
              static_cast<double>(loop.now() - from) * 1e-9, format_table(total).c_str());
  if (const Coordinator& co = d.coordinator(); co.prefix_cache_queries() > 0)
    std::printf("%s since the start\n", describe_prefix_cache(co.prefix_cache_hits(), co.prefix_cache_queries()).c_str());
  if (const auto replay = backend_.trace_replay(d)) std::printf("%s since the start\n", backend_.describe(*replay).c_str());
  std::fflush(stdout);
  backend_.finish();
  return interrupted;
}

}  // namespace sy::cli
