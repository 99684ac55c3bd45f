// The HTTP API over TLS (serve --ssl-*): the same answers, streams, health and metrics as over
// plain HTTP to a client that verifies the server against the test CA; no answer to plain HTTP;
// client certificates required or optional; each wrong setting refused at start with its reason.
// The certificates are committed under tests/data/tls (README.md there says how they were made).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_deployment.h"
#include "engine/model/random_model.h"
#include "engine/serving/http/api_server.h"
#include "engine/serving/http/request_broker.h"
#include "engine/serving/http/tls_settings.h"
#include "tests/serving/http/live_server.h"

namespace sy::http {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string tls_file(const std::string& name) { return std::string(SY_SOURCE_DIR) + "/tests/data/tls/" + name; }

TlsSettings server_tls(int cert_reqs = 0) {
  TlsSettings t;
  t.certfile = tls_file("server.pem");
  t.keyfile = tls_file("server.key");
  if (cert_reqs != 0) t.ca_certs = tls_file("ca.pem");
  t.cert_reqs = cert_reqs;
  return t;
}

// A client that checks the server's certificate against the test CA and its name (127.0.0.1 is
// in the certificate's subjectAltName), with a client certificate when given one.
httplib::Client https_client(int port, const std::string& cert = {}, const std::string& key = {}) {
  httplib::Client c("https://127.0.0.1:" + std::to_string(port), cert, key);
  c.set_ca_cert_path(tls_file("ca.pem").c_str());
  c.enable_server_certificate_verification(true);
  c.set_connection_timeout(5, 0);
  c.set_read_timeout(30, 0);
  return c;
}

class ApiTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("sy_test_http_tls_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 1, dir_).ok());
    weights_ = *ModelWeights::load(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static ApiServerOptions with_tls(const TlsSettings& tls) {
    ApiServerOptions o;
    o.tls = tls;
    return o;
  }
  // The token ids of a stream's events, and whether it ended with [DONE].
  static std::vector<std::int32_t> streamed_ids(const std::string& body, bool& done) {
    std::vector<std::int32_t> ids;
    const SseEvents sse = parse_sse(body);
    done = sse.done > 0;
    for (const json& chunk : sse.data)
      for (const auto& id : chunk["choices"][0]["token_ids"]) ids.push_back(id.get<std::int32_t>());
    return ids;
  }
  // Whether a GET /health over this client is answered 200.
  static bool admitted(httplib::Client& c) {
    auto r = c.Get("/health");
    return r && r->status == 200;
  }

  static inline fs::path dir_;
  static inline std::shared_ptr<const ModelWeights> weights_;
};

// A whole answer, a stream, /health and /metrics over HTTPS are what plain HTTP gives, on one
// kept-alive connection.
TEST_F(ApiTlsTest, HttpsAnswersAsHttpDoes) {
  LiveServer plain(weights_, {});
  LiveServer secure(weights_, {}, with_tls(server_tls()));
  auto http = plain.client();
  auto https = https_client(secure.port());
  https.set_keep_alive(true);
  const json body = {{"prompt", {5, 17, 42, 99, 3}}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};

  auto over_http = http.Post("/v1/completions", body.dump(), "application/json");
  auto over_https = https.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(over_http);
  ASSERT_TRUE(over_https) << httplib::to_string(over_https.error());
  EXPECT_EQ(over_https->status, 200) << over_https->body;
  const auto expected = json::parse(over_http->body)["choices"][0]["token_ids"].get<std::vector<std::int32_t>>();
  const json whole = json::parse(over_https->body);
  EXPECT_EQ(whole["choices"][0]["token_ids"].get<std::vector<std::int32_t>>(), expected);
  EXPECT_EQ(whole["usage"]["completion_tokens"], 12);

  json streaming = body;
  streaming["stream"] = true;
  auto stream = https.Post("/v1/completions", streaming.dump(), "application/json");
  ASSERT_TRUE(stream) << httplib::to_string(stream.error());
  EXPECT_EQ(stream->status, 200);
  EXPECT_EQ(stream->get_header_value("Content-Type"), "text/event-stream");
  bool done = false;
  EXPECT_EQ(streamed_ids(stream->body, done), expected);
  EXPECT_TRUE(done) << stream->body;

  auto health = https.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  auto metrics = https.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("switchyard_test_total 3"), std::string::npos) << metrics->body;
}

// A client that cannot verify the server (no CA of its own for the test CA) gets nothing, and a
// plain-HTTP client gets no answer at once instead of waiting out its timeout.
TEST_F(ApiTlsTest, PlainHttpAndUntrustingClientsGetNoAnswer) {
  LiveServer s(weights_, {}, with_tls(server_tls()));
  httplib::Client plain("127.0.0.1", s.port());
  plain.set_connection_timeout(5, 0);
  plain.set_read_timeout(5, 0);
  const auto start = std::chrono::steady_clock::now();
  auto r = plain.Get("/health");
  EXPECT_FALSE(r) << r->status << " " << r->body;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4)) << "the plain client hung";

  httplib::Client untrusting("https://127.0.0.1:" + std::to_string(s.port()));
  untrusting.enable_server_certificate_verification(true);
  untrusting.set_connection_timeout(5, 0);
  untrusting.set_read_timeout(5, 0);
  auto refused = untrusting.Get("/health");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), httplib::Error::SSLServerVerification);
  // The server still serves the clients that trust it.
  auto trusting = https_client(s.port());
  EXPECT_TRUE(admitted(trusting));
}

// --ssl-cert-reqs 2: only clients with a certificate from --ssl-ca-certs get in.
TEST_F(ApiTlsTest, RequiredClientCertificatesKeepOutClientsWithoutOne) {
  LiveServer s(weights_, {}, with_tls(server_tls(2)));
  auto without = https_client(s.port());
  EXPECT_FALSE(admitted(without));
  auto stranger = https_client(s.port(), tls_file("stranger.pem"), tls_file("stranger.key"));
  EXPECT_FALSE(admitted(stranger));
  auto with = https_client(s.port(), tls_file("client.pem"), tls_file("client.key"));
  EXPECT_TRUE(admitted(with));
  auto answer = with.Post("/v1/completions", R"({"prompt": [1, 2, 3], "max_tokens": 2})", "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
}

// --ssl-cert-reqs 1: a client without a certificate gets in; one that sends a certificate the
// CA did not sign does not.
TEST_F(ApiTlsTest, OptionalClientCertificatesMustVerifyWhenSent) {
  LiveServer s(weights_, {}, with_tls(server_tls(1)));
  auto without = https_client(s.port());
  EXPECT_TRUE(admitted(without));
  auto with = https_client(s.port(), tls_file("client.pem"), tls_file("client.key"));
  EXPECT_TRUE(admitted(with));
  auto stranger = https_client(s.port(), tls_file("stranger.pem"), tls_file("stranger.key"));
  EXPECT_FALSE(admitted(stranger));
}

// A client that hangs up mid-stream is noticed over TLS too (the next write fails): its request
// is cancelled and its KV pages freed.
TEST_F(ApiTlsTest, AClientThatLeavesMidStreamFreesItsKv) {
  LiveServer s(weights_, {}, with_tls(server_tls()));
  auto c = https_client(s.port());
  const json body = {{"prompt", {1, 2, 3}}, {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true}};
  int events = 0;
  post_streaming(c, body.dump(), [&](const char* data, std::size_t n) {
    for (std::size_t i = 0; i + 1 < n; ++i) events += data[i] == '\n' && data[i + 1] == '\n';
    return events < 5;  // then hang up
  });
  EXPECT_GE(events, 5);
  EXPECT_TRUE(s.kv_freed());
  EXPECT_EQ(s.finish_reason(0), FinishReason::Cancelled);
}

// A client that gives up on a whole answer is noticed by the keep-alive spaces written to it
// over TLS every 250 ms: its request is cancelled and its KV pages freed.
TEST_F(ApiTlsTest, AClientThatGivesUpOnAWholeAnswerFreesItsKv) {
  LiveServer s(weights_, {}, with_tls(server_tls()));
  auto c = https_client(s.port());
  const json body = {{"prompt", {1, 2, 3}}, {"max_tokens", 2000}, {"ignore_eos", true}};
  std::thread give_up([&] {
    while (s.on_loop([&] { return s.coordinator().open_requests(); }) < 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    c.stop();
  });
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  give_up.join();
  EXPECT_FALSE(res);
  EXPECT_TRUE(s.kv_freed());
  EXPECT_EQ(s.finish_reason(0), FinishReason::Cancelled);
}

// Every wrong setting is refused at start with a message naming the flag, the file and the
// problem; nothing listens.
TEST_F(ApiTlsTest, WrongSettingsAreRefusedWithTheirReason) {
  DeploymentOptions d;
  d.clock = Clock::Wall;
  CpuDeployment deployment(weights_, Topology::colocated(weights_->config(), 1), d);
  RequestBroker broker(deployment);
  struct Case {
    TlsSettings tls;
    std::string says;
  };
  const std::string cert = tls_file("server.pem"), key = tls_file("server.key"), ca = tls_file("ca.pem");
  const std::vector<Case> cases = {
      {{cert, "", "", 0}, "--ssl-certfile needs --ssl-keyfile"},
      {{"", key, "", 0}, "--ssl-keyfile needs --ssl-certfile"},
      {{"", "", ca, 0}, "--ssl-ca-certs needs --ssl-certfile and --ssl-keyfile"},
      {{"", "", "", 2}, "--ssl-cert-reqs 2 needs --ssl-certfile and --ssl-keyfile"},
      {{cert, key, "", 3}, "--ssl-cert-reqs 3 is not 0 (none), 1 (optional) or 2 (required)"},
      {{cert, key, "", 2}, "--ssl-cert-reqs 2 asks clients for certificates: give --ssl-ca-certs"},
      {{tls_file("missing.pem"), key, "", 0}, "--ssl-certfile " + tls_file("missing.pem") + ": no such file"},
      {{cert, tls_file("missing.key"), "", 0}, "--ssl-keyfile " + tls_file("missing.key") + ": no such file"},
      {{tls_file(""), key, "", 0}, ": not a regular file"},
      {{key, key, "", 0}, "--ssl-certfile " + key + " holds a private key, not a certificate"},
      {{tls_file("README.md"), key, "", 0}, "--ssl-certfile " + tls_file("README.md") + " holds no PEM certificate"},
      {{cert, cert, "", 0}, "--ssl-keyfile " + cert + " holds a certificate, not a private key"},
      {{cert, tls_file("client.key"), "", 0},
       "--ssl-keyfile " + tls_file("client.key") + " is not the private key of the certificate in --ssl-certfile " +
           cert},
      {{cert, tls_file("server-encrypted.key"), "", 0}, "is encrypted: a passphrase is not supported"},
      // A chain written CA first: the message says the CA's certificate was taken for the server's.
      {{tls_file("ca-first.pem"), key, "", 0},
       "its first certificate, /CN=Switchyard test CA, is a CA's: the server's own certificate must come first"},
      {{cert, key, key, 2}, "--ssl-ca-certs " + key + " holds no PEM certificate"},
      {{cert, key, tls_file("missing-ca.pem"), 1}, "--ssl-ca-certs " + tls_file("missing-ca.pem") + ": no such file"},
  };
  for (const Case& c : cases) {
    ApiServerOptions o = with_tls(c.tls);
    o.port = 0;
    auto refused = ApiServer::start(o, broker);
    ASSERT_FALSE(refused.ok()) << c.says;
    EXPECT_NE(refused.status().message().find(c.says), std::string::npos)
        << "expected: " << c.says << "\n     got: " << refused.status().message();
    // The command's early check says the same.
    EXPECT_EQ(check_tls(c.tls).message(), refused.status().message());
  }
  // An expired certificate is served (as uvicorn does) with a warning naming the file and date;
  // a valid one gives none.
  std::string warning;
  ASSERT_TRUE(check_tls({tls_file("expired.pem"), key, "", 0}, &warning).ok());
  EXPECT_EQ(warning, "the certificate in --ssl-certfile " + tls_file("expired.pem") +
                         " expired on Jan  1 00:00:00 2020 GMT: clients that verify it will refuse the connection");
  warning.clear();
  ASSERT_TRUE(check_tls(server_tls(2), &warning).ok());
  EXPECT_EQ(warning, "");
  // The right files start it, and its URL says https.
  ApiServerOptions o = with_tls(server_tls(2));
  o.port = 0;
  auto started = ApiServer::start(o, broker);
  ASSERT_TRUE(started.ok()) << started.status().message();
  EXPECT_EQ((*started)->url().rfind("https://127.0.0.1:", 0), 0u) << (*started)->url();
}

}  // namespace
}  // namespace sy::http
