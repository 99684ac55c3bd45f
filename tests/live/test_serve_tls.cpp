// `switchyard serve --ssl-certfile … --ssl-keyfile …` as an operator runs it: the API at an
// https:// URL, /health and a stream over TLS, the graceful shutdown letting an HTTPS stream
// finish; and wrong TLS flags refused before the model loads, exit status 1 with the reason.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/model/random_model.h"
#include "tests/live/demo_process.h"

namespace sy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using sy::testing::DemoProcess;

std::string tls_file(const std::string& name) { return std::string(SY_SOURCE_DIR) + "/tests/data/tls/" + name; }

class ServeTls : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sy_test_serve_tls_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 3, dir_).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> serve_args(const std::vector<std::string>& tls) const {
    std::vector<std::string> args = {"serve", "--model", dir_.string(), "--port", "0", "--no-telemetry", "--no-console",
                                     "--shutdown-timeout", "60"};
    args.insert(args.end(), tls.begin(), tls.end());
    return args;
  }

  fs::path dir_;
};

TEST_F(ServeTls, ServesHttpsAndShutsDownGracefully) {
  DemoProcess serve(serve_args({"--ssl-certfile", tls_file("server.pem"), "--ssl-keyfile", tls_file("server.key"),
                                "--ssl-ca-certs", tls_file("ca.pem"), "--ssl-cert-reqs", "2"}));
  ASSERT_TRUE(serve.started());
  const std::string url = serve.wait_for("API at (https://127\\.0\\.0\\.1:[0-9]+)/v1");
  ASSERT_FALSE(url.empty()) << serve.output();
  EXPECT_NE(serve.output().find("HTTPS only, client certificates: required"), std::string::npos) << serve.output();
  const auto client = [&] {
    httplib::Client c(url, tls_file("client.pem"), tls_file("client.key"));
    c.set_ca_cert_path(tls_file("ca.pem").c_str());
    c.enable_server_certificate_verification(true);
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(60, 0);
    return c;
  };
  auto c = client();
  auto health = c.Get("/health");
  ASSERT_TRUE(health) << httplib::to_string(health.error()) << "\n" << serve.output();
  EXPECT_EQ(health->status, 200);

  // A stream, SIGTERM at its first event: the door closes (/health 503 over TLS) while the
  // stream runs to its end, then the process exits 0. The answer is larger than the sockets'
  // buffers (1500 events of 20 log-probabilities), so while this client reads nothing it cannot
  // be sent to its end however fast the engine is: the shutdown must wait for it.
  auto probe = client();
  int tokens = 0, health_while_draining = 0;
  bool first = true, done = false;
  std::string buffer;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = R"({"prompt": [1, 2, 3], "max_tokens": 1500, "logprobs": 20, "stream": true, "ignore_eos": true})";
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    if (first) {
      first = false;
      ::kill(serve.pid(), SIGTERM);
      EXPECT_FALSE(serve.wait_for("shutting down: no new requests").empty()) << serve.output();
      if (auto r = probe.Get("/health")) health_while_draining = r->status;
    }
    buffer.append(data, n);
    for (std::size_t end; (end = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, end + 2)) {
      const std::string event = buffer.substr(0, end);
      if (event == "data: [DONE]") done = true;
      if (event.rfind("data: {", 0) != 0) continue;
      const json chunk = json::parse(event.substr(6));
      EXPECT_FALSE(chunk.contains("error")) << event;
      if (chunk.contains("choices")) tokens += static_cast<int>(chunk["choices"][0]["token_ids"].size());
    }
    return true;
  };
  auto streamed = c.send(req);
  ASSERT_TRUE(streamed) << httplib::to_string(streamed.error());
  EXPECT_EQ(streamed->status, 200);
  EXPECT_EQ(tokens, 1500);
  EXPECT_TRUE(done);
  EXPECT_EQ(health_while_draining, 503);
  const int status = serve.stop(0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << serve.output();
}

// Refused before the model loads: exit status 1, the flag, the file and the problem.
TEST_F(ServeTls, WrongFlagsAreRefusedWithTheirReason) {
  struct Case {
    std::vector<std::string> flags;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--ssl-certfile", tls_file("server.pem")}, "--ssl-certfile needs --ssl-keyfile"},
      {{"--ssl-certfile", tls_file("server.pem"), "--ssl-keyfile", tls_file("client.key")},
       "--ssl-keyfile " + tls_file("client.key") + " is not the private key of the certificate in --ssl-certfile " +
           tls_file("server.pem")},
      {{"--ssl-certfile", tls_file("nothing.pem"), "--ssl-keyfile", tls_file("server.key")},
       "--ssl-certfile " + tls_file("nothing.pem") + ": no such file"},
  };
  for (const Case& c : cases) {
    DemoProcess serve(serve_args(c.flags));
    ASSERT_TRUE(serve.started());
    const int status = serve.stop(0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << "\n" << serve.output();
    EXPECT_NE(serve.output().find("switchyard serve: error: " + c.says), std::string::npos) << serve.output();
  }
  // An empty path (an unset shell variable) is refused by the parser, never plain HTTP.
  for (const char* flag : {"--ssl-certfile", "--ssl-keyfile", "--ssl-ca-certs"}) {
    std::vector<std::string> flags = {"--ssl-certfile", tls_file("server.pem"), "--ssl-keyfile", tls_file("server.key")};
    flags.insert(flags.end(), {flag, ""});
    DemoProcess serve(serve_args(flags));
    ASSERT_TRUE(serve.started());
    const int status = serve.stop(0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 105) << flag << ": " << status << "\n" << serve.output();
    EXPECT_NE(serve.output().find(std::string(flag) + ": an empty path"), std::string::npos) << serve.output();
  }
}

}  // namespace
}  // namespace sy
