// The OpenAI-compatible HTTP server of `switchyard serve` (cpp-httplib on worker threads):
// POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health, GET /metrics.
// Loopback unless an API key or --insecure says otherwise; HTTPS only when given a certificate
// (TlsSettings); timeouts and a worker per connection so that idle or slow clients cannot
// stall it. While the broker drains, /health answers 503 so that load balancers stop sending
// requests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "engine/serving/http/completion_request.h"
#include "engine/serving/http/request_broker.h"
#include "engine/serving/http/text_support.h"
#include "engine/serving/http/tls_settings.h"
#include "telemetry/prometheus_registry.h"

namespace sy::http {

struct ApiServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: the OS picks one (see ApiServer::port())
  // Non-empty: /v1/* needs "Authorization: Bearer <api_key>" (401 otherwise).
  std::string api_key;
  // Listen beyond loopback without an API key.
  bool insecure = false;
  // A certificate and key: HTTPS only (a plain-HTTP client gets no answer), with client
  // certificates verified when asked.
  TlsSettings tls;
  // Connections served at once; a streaming answer holds one for its whole generation.
  int workers = 256;
  int read_timeout_s = 10;   // to send the request
  int write_timeout_s = 10;  // to take each piece of the answer
  // A connection that sends no (next) request within this is closed: an idle client holds a
  // worker at most this long.
  int keep_alive_timeout_s = 5;
  ModelLimits model;
  // The model's tokenizer and chat template (must outlive the server); null: token ids only.
  const TextSupport* text = nullptr;
  // /metrics renders it when set (it must outlive the server); else 404.
  const telemetry::PrometheusRegistry* registry = nullptr;
  // In every answer's id ("cmpl-<run_id>-<request id>"), so that an id names one request of one
  // run and its trace (META.run_id); 0: a random one.
  std::uint64_t run_id = 0;
};

class ApiServer {
 public:
  // Binds and starts serving. Errors: an address beyond loopback without a key or --insecure,
  // a port in use, TLS settings that configure_tls refuses. Ignores SIGPIPE for the process (a
  // client that left must not end it).
  static StatusOr<std::unique_ptr<ApiServer>> start(const ApiServerOptions& options, RequestBroker& broker);
  ~ApiServer();  // stops listening and waits for the workers
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  int port() const { return port_; }
  // Answers accepted and still being written (CompletionHandler::answering).
  std::int64_t answering() const;
  std::string url() const;  // http://HOST:PORT, https:// with TLS

 private:
  struct Impl;
  ApiServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::string host_;
  bool tls_ = false;
};

}  // namespace sy::http
