// What `demo` and `serve` share: a deployment of the chosen backend and layout serving on its
// event loop until Ctrl-C or SIGTERM, with the telemetry stream, control socket and console,
// one summary line per second, and the summary table at the end. The commands add what comes
// in (demo: a synthetic workload; serve: HTTP requests).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/cli/backend_options.h"
#include "engine/cli/live_telemetry.h"
#include "engine/cli/serve_options.h"
#include "engine/dist/distributed_run.h"
#include "engine/runtime/layout.h"

namespace sy::cli {

// --console / --no-console.
struct ConsoleFlags {
  bool console = false;
  bool no_console = false;
  void add_to(CLI::App& app);
};

class ConsoleProcess;

// A graceful end on the first Ctrl-C or SIGTERM (serve --shutdown-timeout): `begin` stops
// taking work, then the service serves on until `done`, `timeout_s` wall seconds, a second
// signal or a dead rank. `what` says what is still open, for the log. timeout_s 0: none.
struct GracefulShutdown {
  double timeout_s = 0;
  std::function<void()> begin;
  std::function<bool()> done;
  std::function<std::string()> what;
};

class LiveService {
 public:
  struct Setup {
    std::string model;  // as Backend::open takes it
    ServeOptions serve;
    BackendOptions backend;
    TelemetryFlags live;
    ConsoleFlags console;
    std::string skew;          // routing skew exp:λ; empty: the model's router
    std::uint64_t seed = 0;    // of the skewed routing
    double pace = 1.0;         // virtual clock (sim): cluster seconds per wall second
    // Under a launcher: the command's options every rank must agree on (compared at the
    // bootstrap), e.g. "demo workload=short rate=40".
    std::string identity;
  };
  // Opens the backend and the layout and makes the deployment (finished requests are dropped:
  // it runs for days). Under a launcher (mpirun, srun, RANK/WORLD_SIZE) this process is one
  // rank of the deployment: it joins the others first. Raises CommandError.
  explicit LiveService(const Setup& setup);
  ~LiveService();

  Deployment& deployment() { return *deployment_; }
  const Backend& backend() const { return backend_; }
  const Layout& layout() const { return layout_; }
  LiveTelemetry* telemetry() { return live_.get(); }
  // A rank other than 0 of a launched deployment: it runs only its devices' workers (no
  // requests, endpoints or console of its own); start() and run() serve until rank 0 ends.
  bool worker_rank() const { return ranks_ && !ranks_->runs_coordinator(); }
  // Why the deployment stopped before it was told to (a rank died); empty otherwise.
  std::string failure() const { return ranks_ ? ranks_->failure() : std::string(); }

  // Streams telemetry and answers control (hooks: the command's own control commands), prints
  // what serves (`lines` after the model and layout), and opens the console where there is a
  // display or when asked. Call once, before run().
  void start(nlohmann::json workload, ControlCommands::Hooks hooks, const std::vector<std::string>& lines);
  // Serves until Ctrl-C or SIGTERM (or `end_ns` of cluster time, when ≥ 0), a summary line a
  // second; then detaches telemetry and prints the summary of the last minute. `stopping` runs
  // on the loop's thread once the end is decided, before the loop is left (serve closes its
  // door there). Returns true when interrupted. A worker rank serves until rank 0 ends the run.
  bool run(std::int64_t end_ns, const std::function<void()>& stopping = {}, const GracefulShutdown& drain = {});

 private:
  // `drain_timeout_s`: rank 0's graceful shutdown, which a signalled worker waits out.
  bool serve_as_worker(double drain_timeout_s);

  Setup setup_;
  Backend backend_;
  Layout layout_;
  DeploymentOptions options_;
  std::string findep_choice_;  // --findep-config auto: what the solver chose, printed by start()
  std::unique_ptr<Deployment> deployment_;
  // Under a launcher. After deployment_: its receiver thread posts onto the deployment's loop,
  // so it goes first.
  std::unique_ptr<dist::DistributedRun> ranks_;
  std::unique_ptr<LiveTelemetry> live_;
  std::unique_ptr<ConsoleProcess> console_;
};

}  // namespace sy::cli
