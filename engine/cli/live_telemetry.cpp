#include "engine/cli/live_telemetry.h"

#include <charconv>

#include "engine/cli/cli_support.h"
#include "telemetry/curve_server.h"
#include "telemetry/endpoint.h"

namespace sy::cli {
namespace {

// "9100" or "HOST:9100"; loopback unless a host is given.
std::pair<std::string, int> parse_metrics_address(const std::string& text) {
  std::string host = "127.0.0.1", port_text = text;
  if (const auto colon = text.rfind(':'); colon != std::string::npos) {
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  int port = -1;
  const auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 0 || port > 65535 || host.empty())
    throw CommandError{"--metrics '" + text + "': expected PORT or HOST:PORT (port 0-65535)"};
  return {host, port};
}

}  // namespace

void TelemetryFlags::add_to(CLI::App& app, bool default_on) {
  on_by_default = default_on;
  const std::string when = default_on ? " (default " : " (off unless given; e.g. ";
  app.add_option("--telemetry", telemetry,
                 "ZeroMQ PUB endpoint of the telemetry stream" + when + kDefaultTelemetryEndpoint + ")");
  app.add_option("--control", control, "ZeroMQ endpoint of the control socket" + when + kDefaultControlEndpoint + ")");
  app.add_option("--metrics", metrics, "Serve Prometheus metrics at http://HOST:PORT/metrics (PORT: loopback)");
  app.add_option("--keys", keys, "CURVE key directory (switchyard keys): required to listen beyond loopback");
  app.add_flag("--insecure", insecure, "Listen beyond loopback without CURVE keys (anyone may connect)");
  app.add_option("--record", record,
                 "Record the run's telemetry to this new SQLite trace (a relative name lands in --record-dir)");
  app.add_option("--record-dir", record_dir,
                 "The only directory recordings started over the control socket are written to (default " +
                     telemetry::RecordingDirectory::default_path().string() + ")");
  app.add_option("--record-max", record_max, "Size cap of a recording in bytes (e.g. 2GB); 0: none")
      ->transform(CLI::AsSizeValue(false));
  if (default_on) app.add_flag("--no-telemetry", off, "Neither stream nor control socket");
}

bool TelemetryFlags::wanted() const {
  if (prometheus) return true;
  if (off) return false;
  return on_by_default || !telemetry.empty() || !control.empty() || !metrics.empty() || !record.empty();
}

std::unique_ptr<LiveTelemetry> LiveTelemetry::start(const TelemetryFlags& flags) {
  if (!flags.wanted()) return nullptr;
  std::unique_ptr<LiveTelemetry> live(new LiveTelemetry());
  live->flags_ = flags;
  TelemetryFlags& f = live->flags_;
  // On by default (demo), or when either socket is asked for, both get their endpoints.
  const bool sockets = !f.off && (f.on_by_default || !f.telemetry.empty() || !f.control.empty());
  if (sockets && f.telemetry.empty()) f.telemetry = kDefaultTelemetryEndpoint;
  if (sockets && f.control.empty()) f.control = kDefaultControlEndpoint;

  std::optional<telemetry::CurveServerConfig> curve;
  if (!f.keys.empty()) curve = take(telemetry::load_curve_server_config(f.keys));
  if (!f.telemetry.empty())
    check(telemetry::check_listen_endpoint("telemetry", f.telemetry, curve.has_value(), f.insecure));
  if (!f.control.empty())
    check(telemetry::check_listen_endpoint("control", f.control, curve.has_value(), f.insecure));

  telemetry::HubOptions hub;
  hub.endpoint = f.telemetry;
  hub.curve = curve;
  live->hub_ = take(telemetry::TelemetryHub::start(hub));

  if (!f.metrics.empty()) {
    const auto [host, port] = parse_metrics_address(f.metrics);
    // One exposure rule for every endpoint: beyond loopback only when the operator says so.
    // The metrics endpoint has no CURVE, so keys do not open it; only --insecure does.
    const std::string as_endpoint = "tcp://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                                    std::to_string(port);
    if (!telemetry::is_loopback_endpoint(as_endpoint) && !f.insecure)
      throw CommandError{"--metrics " + f.metrics + " listens beyond loopback, and the metrics endpoint has no keys: "
                         "bind it to 127.0.0.1 (give only a port), or pass --insecure to expose it to anyone who can "
                         "reach the port"};
    live->metrics_host_ = host;
    live->registry_ = std::make_unique<telemetry::PrometheusRegistry>();
    live->serving_metrics_ = std::make_unique<telemetry::ServingMetrics>(*live->registry_);
    live->http_ = take(telemetry::MetricsHttpServer::start(*live->registry_, host, port));
  }
  if (f.prometheus && !live->registry_) {
    live->registry_ = std::make_unique<telemetry::PrometheusRegistry>();
    live->serving_metrics_ = std::make_unique<telemetry::ServingMetrics>(*live->registry_);
  }
  const bool relative_record = !f.record.empty() && f.record.is_relative();
  if (!f.control.empty() || relative_record) {
    live->recordings_ = take(telemetry::RecordingDirectory::open(
        f.record_dir.empty() ? telemetry::RecordingDirectory::default_path() : f.record_dir));
  }
  if (relative_record) f.record = take(live->recordings_->resolve(f.record.string(), /*overwrite=*/false));
  if (!f.control.empty()) {
    telemetry::ControlServerOptions o;
    o.endpoint = f.control;
    o.curve = curve;
    o.known_commands = ControlCommands::names();
    // A whole placement for a large model is bigger than the default limit.
    o.max_request_bytes = 1024 * 1024;
    LiveTelemetry* self = live.get();
    live->control_ = take(telemetry::ControlServer::start(
        o, [self](nlohmann::json command, telemetry::ControlServer::Reply reply) {
          self->handle(std::move(command), std::move(reply));
        }));
  }
  return live;
}

LiveTelemetry::~LiveTelemetry() {
  // The control server goes first so that no command arrives for what is being torn down.
  control_.reset();
  detach();
  if (hub_ && hub_->recording_path()) (void)hub_->stop_recording(final_metadata_);
}

void LiveTelemetry::handle(nlohmann::json command, telemetry::ControlServer::Reply reply) {
  std::lock_guard lock(target_mutex_);
  if (!target_) {
    reply.error("no deployment is serving right now");
    return;
  }
  ControlCommands* target = target_;
  loop_->post_external([target, command = std::move(command), reply] {
    // The commands check what they read; an exception that still escapes one is a bug of ours,
    // and on the loop's thread it would end the engine: the client hears of it instead.
    try {
      target->handle(command, [reply](const nlohmann::json& r) { reply(r); });
    } catch (const std::exception& e) {
      reply.error("internal error handling '" + command.value("cmd", std::string()) + "': " + e.what());
    }
  });
}

void LiveTelemetry::attach(Deployment& deployment, RunInfo info, ControlCommands::Hooks hooks) {
  detach();
  bridge_ = std::make_unique<TelemetryBridge>(deployment, *hub_, serving_metrics_.get(), std::move(info),
                                              TelemetryBridge::Options{});
  commands_ = std::make_unique<ControlCommands>(deployment, *bridge_, *hub_, std::move(hooks),
                                                recordings_ ? &*recordings_ : nullptr, flags_.record_max);
  if (!flags_.record.empty() && !recording_started_) {
    telemetry::RecorderOptions r;
    r.path = flags_.record;
    r.max_bytes = flags_.record_max;
    r.format = flags_.record_format;
    r.codec = flags_.record_codec;
    r.span_windows = flags_.record_windows;
    r.metadata = bridge_->recording_metadata();
    r.device_names = deployment.cluster().topology().device_names;
    if (Status started = hub_->start_recording(r); !started.ok()) {
      // The error unwinds past the deployment, which goes first: nothing may outlive it.
      commands_.reset();
      bridge_.reset();
      check(started);
    }
    recording_started_ = true;
  }
  std::lock_guard lock(target_mutex_);
  loop_ = &deployment.loop();
  target_ = commands_.get();
}

void LiveTelemetry::detach() {
  {
    std::lock_guard lock(target_mutex_);
    loop_ = nullptr;
    target_ = nullptr;
  }
  if (bridge_) {
    bridge_->finish();
    // What the recording's META keeps from the end of the run (the processes' measured clock
    // offsets and states): the recording is closed after the deployment is gone.
    if (const nlohmann::json processes = bridge_->meta()["processes"]; !processes.is_null())
      final_metadata_["processes"] = processes.dump();
  }
  commands_.reset();
  bridge_.reset();
}

std::string LiveTelemetry::control_endpoint() const { return control_ ? control_->endpoint() : std::string(); }

std::string LiveTelemetry::describe() const {
  std::string out;
  if (!hub_->endpoint().empty()) out += "telemetry " + hub_->endpoint();
  if (control_) out += std::string(out.empty() ? "" : ", ") + "control " + control_->endpoint();
  if (http_) out += std::string(out.empty() ? "" : ", ") + "metrics http://" + metrics_host_ + ":" + std::to_string(http_->port()) + "/metrics";
  if (!flags_.record.empty()) out += std::string(out.empty() ? "" : ", ") + "recording " + flags_.record.string();
  return out;
}

}  // namespace sy::cli
