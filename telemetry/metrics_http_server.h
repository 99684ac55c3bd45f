// Serves a PrometheusRegistry at GET /metrics over HTTP (cpp-httplib) on a background thread,
// for `--metrics PORT`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "telemetry/prometheus_registry.h"
#include "base/status.h"

namespace sy::telemetry {

class MetricsHttpServer {
 public:
  // Listens on host:port (port 0: the OS picks one, see port()). The registry must outlive the
  // server. Errors name the address (in use, not an address of this machine).
  static StatusOr<std::unique_ptr<MetricsHttpServer>> start(const PrometheusRegistry& registry,
                                                            const std::string& host, int port);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Connections served at once; each gets a second to send its request and take the answer.
  static constexpr int kWorkers = 8;

  int port() const { return port_; }
  std::uint64_t scrapes() const;

 private:
  struct Impl;
  MetricsHttpServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace sy::telemetry
