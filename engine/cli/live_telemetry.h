// The live side of a serving command (demo, bench, generate): the telemetry stream, the control
// socket, the Prometheus endpoint and recording, with their flags, wired to whichever
// deployment is running.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/serving/control_commands.h"
#include "engine/serving/deployment.h"
#include "engine/serving/telemetry_bridge.h"
#include "telemetry/control_server.h"
#include "telemetry/metrics_http_server.h"
#include "telemetry/prometheus_registry.h"
#include "telemetry/recording_directory.h"
#include "telemetry/serving_metrics.h"
#include "telemetry/telemetry_hub.h"

namespace sy::cli {

inline constexpr const char* kDefaultTelemetryEndpoint = "tcp://127.0.0.1:5555";
inline constexpr const char* kDefaultControlEndpoint = "tcp://127.0.0.1:5556";

struct TelemetryFlags {
  std::string telemetry;        // PUB endpoint; empty: the default when on, else off
  std::string control;          // ROUTER endpoint; likewise
  std::string metrics;          // Prometheus: PORT or HOST:PORT; empty: off
  std::filesystem::path keys;   // CURVE key directory (switchyard keys)
  bool insecure = false;        // listen beyond loopback without CURVE
  std::filesystem::path record; // record the whole run to this SQLite trace (relative: under record_dir)
  std::filesystem::path record_dir;  // where control's record_start writes; empty: the default
  std::uint64_t record_max = 0;      // bytes a recording may grow to; 0: no cap
  // How --record stores spans (benchmarks compare them; the CLI keeps the default).
  telemetry::TraceFormat record_format = telemetry::TraceFormat::Blocks;
  telemetry::BlockCodec record_codec = telemetry::BlockCodec::Zstd;
  bool record_windows = true;  // the trace's SPAN_WINDOWS overview (false: as before it, for benchmarks)
  bool off = false;             // demo: --no-telemetry
  bool on_by_default = false;   // demo: stream and control on the default endpoints
  bool prometheus = false;      // serve: keep the Prometheus registry (its own /metrics) even without --metrics

  void add_to(CLI::App& app, bool default_on);
  // Whether the command should start anything at all.
  bool wanted() const;
};

class LiveTelemetry {
 public:
  // Binds what the flags ask for; nullptr when they ask for nothing. Raises CommandError
  // naming the endpoint, port or key problem.
  static std::unique_ptr<LiveTelemetry> start(const TelemetryFlags& flags);
  ~LiveTelemetry();
  LiveTelemetry(const LiveTelemetry&) = delete;
  LiveTelemetry& operator=(const LiveTelemetry&) = delete;

  // Streams `deployment` and answers control commands for it until detach(). Call before the
  // deployment's loop runs, on the thread that runs it.
  void attach(Deployment& deployment, RunInfo info, ControlCommands::Hooks hooks);
  // Publishes the last window and stops answering for the deployment (its loop has stopped).
  void detach();
  // One line: where the stream, control socket and metrics listen.
  std::string describe() const;
  TelemetryBridge* bridge() { return bridge_.get(); }
  // The Prometheus registry (with --metrics or TelemetryFlags::prometheus), else null.
  const telemetry::PrometheusRegistry* registry() const { return registry_.get(); }
  // The bound endpoints (with the ports chosen for port 0); empty when not listening.
  std::string telemetry_endpoint() const { return hub_->endpoint(); }
  std::string control_endpoint() const;
  // The stream's run id (META.run_id of its recordings).
  std::uint64_t run_id() const { return hub_->run_id(); }

 private:
  LiveTelemetry() = default;
  void handle(nlohmann::json command, telemetry::ControlServer::Reply reply);

  TelemetryFlags flags_;
  std::map<std::string, std::string> final_metadata_;  // written into META when the recording stops
  std::unique_ptr<telemetry::TelemetryHub> hub_;
  std::unique_ptr<telemetry::PrometheusRegistry> registry_;
  std::unique_ptr<telemetry::ServingMetrics> serving_metrics_;
  std::unique_ptr<telemetry::MetricsHttpServer> http_;
  std::string metrics_host_;
  std::unique_ptr<TelemetryBridge> bridge_;
  std::unique_ptr<ControlCommands> commands_;
  // The control server's thread reads these; attach/detach write them.
  std::mutex target_mutex_;
  EventLoop* loop_ = nullptr;
  ControlCommands* target_ = nullptr;
  std::unique_ptr<telemetry::ControlServer> control_;
  std::optional<telemetry::RecordingDirectory> recordings_;
  bool recording_started_ = false;
};

}  // namespace sy::cli
