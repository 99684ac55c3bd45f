// `switchyard serve`: the OpenAI-compatible HTTP API in front of a live deployment, with the
// telemetry stream, control socket and console of `demo`, until Ctrl-C or SIGTERM.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/cli/live_service.h"
#include "engine/cli/number_validators.h"
#include "engine/dist/rank_environment.h"
#include "engine/serving/http/api_server.h"
#include "engine/serving/http/request_broker.h"

namespace sy::cli {
namespace {

struct ServeArgs {
  std::string model;
  std::string served_name;
  ServeOptions serve;
  BackendOptions backend;
  TelemetryFlags live;
  ConsoleFlags console;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  http::TlsSettings tls;
  int workers = 256;
  bool ignore_eos = false;
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;  // "hermes" or empty
  double pace = 1.0;
  double shutdown_timeout_s = 0;
};

void run(ServeArgs a) {
  if (a.shutdown_timeout_s > 86400) {
    char what[96];
    std::snprintf(what, sizeof what, "--shutdown-timeout %g is more than a day (86400 s)", a.shutdown_timeout_s);
    throw CommandError{what};
  }
  if (a.api_key.empty())
    if (const char* env = std::getenv("SWITCHYARD_API_KEY"); env && *env) a.api_key = env;
  // A wrong certificate or key is refused before the model loads, on the rank that serves HTTP
  // (the other ranks need not hold the files; a bad launcher variable is LiveService's to name).
  if (a.tls.enabled()) {
    const auto env = dist::RankEnvironment::from_process();
    std::string warning;
    if (!env.ok() || env->rank == 0) check(http::check_tls(a.tls, &warning));
    if (!warning.empty()) std::fprintf(stderr, "switchyard serve: warning: %s\n", warning.c_str());
  }
  // vLLM's rule: the model may only choose its tools when the server knows how to read its calls.
  if (a.enable_auto_tool_choice && a.tool_call_parser.empty())
    throw CommandError{"--enable-auto-tool-choice requires --tool-call-parser (hermes)"};
  if (a.serve.layout.empty()) a.serve.layout = "colocated:1";
  a.live.prometheus = true;  // for GET /metrics on the API's own port
  LiveService service({a.model, a.serve, a.backend, a.live, a.console, /*skew=*/"", /*seed=*/0, a.pace,
                       "serve ignore_eos=" + std::to_string(a.ignore_eos)});
  if (service.worker_rank()) {  // rank 0 runs the HTTP API; a signalled worker waits out its drain
    service.start({}, {}, {});
    service.run(-1, {}, GracefulShutdown{a.shutdown_timeout_s, {}, {}, {}});
    return;
  }
  Deployment& d = service.deployment();
  const ModelConfig& c = service.backend().config();

  // Text needs the model's tokenizer.json; the sim backend may have only a shape.
  std::error_code ec;
  const http::TextSupport text = std::filesystem::is_directory(a.model, ec)
                                     ? take(http::TextSupport::load(a.model))
                                     : http::TextSupport();
  http::RequestBroker broker(d);
  http::ApiServerOptions o;
  o.host = a.host;
  o.port = a.port;
  o.api_key = a.api_key;
  o.insecure = a.live.insecure;
  o.tls = a.tls;
  o.workers = a.workers;
  o.model = {a.served_name.empty() ? service.backend().model_name() : a.served_name, c.max_position_embeddings,
             c.vocab_size, std::nullopt};
  o.model.logits = !service.backend().sim();  // the sim computes none: prompt log-probabilities are refused there
  if (service.backend().sim())
    o.model.no_guided_reason = "the sim backend computes no logits to constrain (use --backend cpu or cuda)";
  o.model.auto_tool_choice = a.enable_auto_tool_choice;
  o.registry = service.telemetry() ? service.telemetry()->registry() : nullptr;
  if (service.telemetry()) o.run_id = service.telemetry()->run_id();
  // eos (the tokenizer's, else config.json's) is a stop token of each request, which
  // ignore_eos lifts, not the coordinator's.
  if (!a.ignore_eos) o.model.eos_token_id = text.eos_token_id() ? text.eos_token_id() : c.eos_token_id;
  o.text = &text;
  std::unique_ptr<http::ApiServer> server = take(http::ApiServer::start(o, broker));
  service.start(nlohmann::json{{"source", "http"}}, {},
                {"OpenAI-compatible API at " + server->url() + "/v1 (model \"" + o.model.name + "\", context " +
                 std::to_string(o.model.context) + " tokens)" + (a.api_key.empty() ? "" : ", API key required") +
                     (a.tls.enabled() ? std::string(", HTTPS only, client certificates: ") + a.tls.client_certificates()
                                      : std::string()),
                 "prompts: " + text.describe() +
                     (a.enable_auto_tool_choice ? "; tool calls parsed (" + a.tool_call_parser + ")" : "")});
  // With a shutdown timeout the first signal only closes the door (new requests and /health
  // answer 503) and the open answers run to their end, as vLLM's --shutdown-timeout. Once the
  // end is decided no request is taken and every open one is answered 503, so the HTTP
  // workers finish while the loop is still ours to leave.
  const http::ApiServer& api = *server;
  GracefulShutdown drain{a.shutdown_timeout_s, [&broker] { broker.drain(); },
                           [&broker, &api] { return broker.open_requests() == 0 && api.answering() == 0; },
                           [&broker, &api] {
                             return std::to_string(broker.open_requests()) + " open requests (a choice each), " +
                                    std::to_string(api.answering()) + " answers being sent";
                           }};
  service.run(-1, [&broker] { broker.close(); }, drain);
  server.reset();
  if (!service.failure().empty()) throw CommandError{"the deployment stopped: " + service.failure()};
}

}  // namespace

void register_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Serve a model over an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions) until Ctrl-C");
  sub->add_option("--model", args->model,
                  "Model directory (cpu), or on --backend sim also a config.json or a name from assets/models")
      ->required();
  sub->add_option("--served-model-name", args->served_name, "The model name clients use (default: the directory's name)");
  args->serve.max_num_batched_tokens = ServeOptions::kServeMaxNumBatchedTokens;  // vLLM's serving default
  args->serve.add_to(*sub, /*layout_required=*/false);
  args->backend.add_to(*sub);
  sub->add_option("--host", args->host, "Address the HTTP API listens on (beyond loopback needs --api-key or --insecure)")
      ->capture_default_str();
  sub->add_option("--port", args->port, "HTTP port (0: any free port, printed)")->check(CLI::Range(0, 65535))
      ->capture_default_str();
  sub->add_option("--api-key", args->api_key,
                  "Clients must send 'Authorization: Bearer KEY' to /v1/* (default: $SWITCHYARD_API_KEY)");
  // An empty path (an unset shell variable) must not quietly mean plain HTTP.
  static const CLI::Validator file_given(
      [](std::string& path) {
        return path.empty() ? std::string("an empty path: give the file, or leave the flag out for plain HTTP")
                            : std::string();
      },
      "FILE");
  sub->add_option("--ssl-certfile", args->tls.certfile,
                  "PEM certificate (then any intermediates) of the API: it speaks HTTPS only (needs --ssl-keyfile)")
      ->check(file_given);
  sub->add_option("--ssl-keyfile", args->tls.keyfile, "PEM private key of --ssl-certfile (unencrypted)")
      ->check(file_given);
  sub->add_option("--ssl-ca-certs", args->tls.ca_certs,
                  "PEM CA certificates that client certificates must be signed by (for --ssl-cert-reqs 1 or 2)")
      ->check(file_given);
  sub->add_option("--ssl-cert-reqs", args->tls.cert_reqs,
                  "Client certificates, as Python's ssl module numbers it: 0 not asked for, 1 optional (one that is "
                  "sent must verify), 2 required")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  sub->add_option("--shutdown-timeout", args->shutdown_timeout_s,
                  "On Ctrl-C or SIGTERM, refuse new requests but let the open ones finish, for up to this many "
                  "seconds (0: answer them 503 at once); a second signal stops at once")
      ->check(non_negative_number())
      ->capture_default_str();
  sub->add_option("--http-workers", args->workers,
                  "Connections served at once (a streaming answer holds one for its whole generation)")
      ->check(CLI::Range(4, 4096))->capture_default_str();
  sub->add_flag("--ignore-eos", args->ignore_eos, "Do not stop requests at the model's eos_token_id");
  sub->add_flag("--enable-auto-tool-choice", args->enable_auto_tool_choice,
                "Chat requests with tools may let the model call them (tool_choice \"auto\"); its calls are parsed "
                "into tool_calls by --tool-call-parser");
  sub->add_option("--tool-call-parser", args->tool_call_parser,
                  "How the model writes tool calls: hermes (<tool_call>{json}</tool_call>, Qwen and Hermes models)")
      ->check(CLI::IsMember({"hermes"}));
  sub->add_option("--pace", args->pace, "Sim backend: cluster seconds per wall second")
      ->check(positive_number())->capture_default_str();
  args->live.add_to(*sub, /*default_on=*/true);
  args->console.add_to(*sub);
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
