#include "telemetry/metrics_http_server.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <httplib.h>

namespace sy::telemetry {

struct MetricsHttpServer::Impl {
  httplib::Server server;
  std::thread thread;
  std::atomic<std::uint64_t> scrapes{0};
};

StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::start(const PrometheusRegistry& registry,
                                                                      const std::string& host, int port) {
  const std::string where = host + ":" + std::to_string(port);
  if (port < 0 || port > 65535) return Status::Error("metrics port " + std::to_string(port) + " is not 0 to 65535");
  std::unique_ptr<MetricsHttpServer> self(new MetricsHttpServer());
  self->impl_ = std::make_unique<Impl>();
  Impl& impl = *self->impl_;
  // A connection holds a worker until it is answered or times out, so idle or slow clients
  // must neither keep one long nor be able to take them all: eight workers, one second to
  // send the request and take the answer, and no keep-alive (a scrape is one request).
  impl.server.new_task_queue = [] { return new httplib::ThreadPool(kWorkers); };
  impl.server.set_read_timeout(1, 0);
  impl.server.set_write_timeout(1, 0);
  impl.server.set_keep_alive_max_count(1);
  impl.server.set_keep_alive_timeout(1);
  impl.server.set_payload_max_length(64 * 1024);
  // cpp-httplib's default adds SO_REUSEPORT, with which a second engine on the same port would
  // bind too and the scrapes would alternate between them. Address reuse alone only spares a
  // restart the TIME_WAIT delay.
  impl.server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  Impl* raw = &impl;
  impl.server.Get("/metrics", [&registry, raw](const httplib::Request&, httplib::Response& res) {
    ++raw->scrapes;
    res.set_content(registry.render(), PrometheusRegistry::kContentType);
  });
  impl.server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("Switchyard metrics: GET /metrics (Prometheus text format 0.0.4)\n", "text/plain");
  });
  int bound = 0;
  if (port == 0) {
    bound = impl.server.bind_to_any_port(host);
  } else {
    bound = impl.server.bind_to_port(host, port) ? port : -1;
  }
  if (bound <= 0) return Status::Error("cannot serve metrics on " + where + " (address in use or not local)");
  self->port_ = bound;
  impl.thread = std::thread([raw] { raw->server.listen_after_bind(); });
  // cpp-httplib 0.11 has no wait_until_ready(): the socket is bound already, so connections
  // queue in the backlog; waiting for is_running() only makes stop() well-defined.
  for (int i = 0; i < 2000 && !impl.server.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return self;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (!impl_) return;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint64_t MetricsHttpServer::scrapes() const { return impl_->scrapes.load(); }

}  // namespace sy::telemetry
