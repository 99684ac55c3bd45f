#include "engine/serving/http/api_server.h"

#include <signal.h>

#include <chrono>
#include <exception>
#include <memory>
#include <random>
#include <thread>

#include <httplib.h>

#include "engine/serving/http/completion_handler.h"
#include "engine/serving/http/openai_shapes.h"
#include "engine/serving/http/tokenize_handler.h"
#include "telemetry/endpoint.h"
#include "telemetry/telemetry_hub.h"

namespace sy::http {

struct ApiServer::Impl {
  std::unique_ptr<httplib::Server> server;  // an httplib::SSLServer with TLS
  std::thread thread;
  TextSupport no_text;  // when the options bring none
  std::unique_ptr<CompletionHandler> completions;
  std::unique_ptr<TokenizeHandler> tokenize;
};

namespace {

bool bearer_matches(const httplib::Request& req, const std::string& key) {
  const std::string auth = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (auth.size() != prefix.size() + key.size() || auth.compare(0, prefix.size(), prefix) != 0) return false;
  // Constant time: the comparison says nothing about how much of the key was right.
  unsigned char diff = 0;
  for (std::size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(auth[prefix.size() + i] ^ key[i]);
  return diff == 0;
}

// Every handler's body: an exception of ours or a library's becomes a 500 answer, never a
// terminated process.
template <class Fn>
httplib::Server::Handler guarded(Fn fn) {
  return [fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
    try {
      fn(req, res);
    } catch (const std::exception& e) {
      set_error(res, ApiError{500, std::string("internal error: ") + e.what(), "internal_error", {}, {}});
    } catch (...) {
      set_error(res, ApiError{500, "internal error", "internal_error", {}, {}});
    }
  };
}

}  // namespace

StatusOr<std::unique_ptr<ApiServer>> ApiServer::start(const ApiServerOptions& o, RequestBroker& broker) {
  const std::string where = o.host + ":" + std::to_string(o.port);
  if (o.port < 0 || o.port > 65535) return Status::Error("HTTP port " + std::to_string(o.port) + " is not 0 to 65535");
  const std::string as_endpoint =
      "tcp://" + (o.host.find(':') != std::string::npos ? "[" + o.host + "]" : o.host) + ":" + std::to_string(o.port);
  // One exposure rule for every endpoint: beyond loopback only with a key or when told so.
  if (!telemetry::is_loopback_endpoint(as_endpoint) && o.api_key.empty() && !o.insecure)
    return Status::Error("--host " + o.host + " listens beyond loopback: give --api-key KEY (or SWITCHYARD_API_KEY) so "
                         "that clients must send it, or --insecure to let anyone who can reach the port use the API");
  ::signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<ApiServer> self(new ApiServer());
  self->impl_ = std::make_unique<Impl>();
  self->host_ = o.host;
  Impl& impl = *self->impl_;
  if (o.tls.enabled()) {
    // httplib's SSLServer only says whether its context is valid; the reason comes back here.
    Status tls = Status::Error("HTTPS: OpenSSL cannot make a server context");
    impl.server = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
      tls = configure_tls(ctx, o.tls);
      return tls.ok();
    });
    if (!impl.server->is_valid()) return tls.ok() ? Status::Error("HTTPS: OpenSSL refused the settings") : tls;
    self->tls_ = true;
  } else {
    impl.server = std::make_unique<httplib::Server>();
  }
  const std::uint64_t run_id = o.run_id != 0 ? o.run_id : telemetry::random_run_id();
  impl.completions = std::make_unique<CompletionHandler>(broker, o.model, o.text ? *o.text : impl.no_text,
                                                         std::random_device{}(), "cmpl-" + std::to_string(run_id) + "-");
  httplib::Server& s = *impl.server;
  const int workers = o.workers;
  s.new_task_queue = [workers] { return new httplib::ThreadPool(static_cast<std::size_t>(workers)); };
  s.set_read_timeout(o.read_timeout_s, 0);
  s.set_write_timeout(o.write_timeout_s, 0);
  s.set_keep_alive_timeout(o.keep_alive_timeout_s);
  s.set_keep_alive_max_count(1000);
  s.set_payload_max_length(16 * 1024 * 1024);
  // No SO_REUSEPORT (cpp-httplib's default): a second server on the port must fail to bind.
  // The listening socket is kept to widen its backlog after the bind (below).
  auto listening = std::make_shared<socket_t>(INVALID_SOCKET);
  s.set_socket_options([listening](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    *listening = sock;
  });
  const std::string key = o.api_key;
  s.set_pre_routing_handler([key](const httplib::Request& req, httplib::Response& res) {
    // As vLLM's --api-key: the API needs the key; health and metrics stay open to probes. The
    // tokenizer endpoints are the API's too (vLLM leaves them open; they read the chat template).
    const bool api = req.path.rfind("/v1/", 0) == 0 || req.path == "/tokenize" || req.path == "/detokenize";
    if (key.empty() || !api || bearer_matches(req, key))
      return httplib::Server::HandlerResponse::Unhandled;
    set_error(res, ApiError::unauthorized());
    return httplib::Server::HandlerResponse::Handled;
  });
  CompletionHandler* completions = impl.completions.get();
  s.Post("/v1/completions", guarded([completions](const httplib::Request& req, httplib::Response& res) {
           completions->handle(req, res, Endpoint::Completions);
         }));
  s.Post("/v1/chat/completions", guarded([completions](const httplib::Request& req, httplib::Response& res) {
           completions->handle(req, res, Endpoint::ChatCompletions);
         }));
  impl.tokenize = std::make_unique<TokenizeHandler>(o.model, o.text ? *o.text : impl.no_text);
  const TokenizeHandler* tokenize = impl.tokenize.get();
  const auto answer = [](httplib::Response& res, TokenizeHandler::Answer a) {
    if (const ApiError* e = std::get_if<ApiError>(&a)) return set_error(res, *e);
    res.set_content(std::get<nlohmann::ordered_json>(a).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace),
                    "application/json");
  };
  s.Post("/tokenize", guarded([tokenize, answer](const httplib::Request& req, httplib::Response& res) {
           answer(res, tokenize->tokenize(req.body));
         }));
  s.Post("/detokenize", guarded([tokenize, answer](const httplib::Request& req, httplib::Response& res) {
           answer(res, tokenize->detokenize(req.body));
         }));
  const std::int64_t created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const ModelLimits model = o.model;
  s.Get("/v1/models", guarded([model, created](const httplib::Request&, httplib::Response& res) {
          res.set_content(json_text(models_json(model.name, created, model.context)), "application/json");
        }));
  RequestBroker* door = &broker;
  s.Get("/health", guarded([door](const httplib::Request&, httplib::Response& res) {
          // Draining: a readiness probe sees 503 and the load balancer stops sending requests.
          if (door->draining()) {
            res.status = 503;
            res.set_content("{\"status\":\"shutting_down\"}", "application/json");
            return;
          }
          res.set_content("{\"status\":\"ok\"}", "application/json");
        }));
  const telemetry::PrometheusRegistry* registry = o.registry;
  s.Get("/metrics", guarded([registry](const httplib::Request&, httplib::Response& res) {
          if (!registry) return set_error(res, ApiError::not_found("metrics are off", "not_found"));
          res.set_content(registry->render(), telemetry::PrometheusRegistry::kContentType);
        }));
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    // Our handlers set their bodies; this covers unknown paths and methods.
    if (!res.body.empty()) return;
    if (res.status == 404) {
      set_error(res, ApiError::not_found("no such endpoint: " + req.method + " " + req.path, "not_found"));
    } else if (res.status == 413) {
      set_error(res, ApiError{413, "the request body is larger than 16 MiB", "invalid_request_error", {}, {}});
    } else if (res.status >= 400) {
      // What the HTTP library refused before any handler ran (a POST without a body or its
      // length, a malformed request line or header): the same error shape as every other.
      set_error(res, ApiError{res.status,
                              "the HTTP request could not be read (status " + std::to_string(res.status) +
                                  "): a POST needs a JSON body with its Content-Length, or chunked",
                              "invalid_request_error", {}, {}});
    }
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    set_error(res, ApiError{500, "internal error", "internal_error", {}, {}});
  });

  int bound = 0;
  if (o.port == 0) {
    bound = s.bind_to_any_port(o.host);
  } else {
    bound = s.bind_to_port(o.host, o.port) ? o.port : -1;
  }
  if (bound <= 0) return Status::Error("cannot serve HTTP on " + where + " (address in use or not of this machine)");
  // Debian's cpp-httplib listens with a backlog of 5: a burst of clients connecting at once
  // would see their SYNs dropped and retried a second later. listen() again widens it.
  if (*listening != INVALID_SOCKET) ::listen(*listening, SOMAXCONN);
  self->port_ = bound;
  Impl* raw = &impl;
  impl.thread = std::thread([raw] { raw->server->listen_after_bind(); });
  for (int i = 0; i < 2000 && !s.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return self;
}

ApiServer::~ApiServer() {
  if (!impl_) return;
  impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::int64_t ApiServer::answering() const { return impl_->completions->answering(); }

std::string ApiServer::url() const {
  const std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return (tls_ ? "https://" : "http://") + host + ":" + std::to_string(port_);
}

}  // namespace sy::http
