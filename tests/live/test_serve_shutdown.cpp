// `switchyard serve` as Kubernetes ends it: with --shutdown-timeout the first SIGTERM closes the
// door (new requests and /health answer 503) while the open answers run to their end, and the
// process then exits 0; a second signal, or no timeout, answers the open ones 503 at once.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <atomic>
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

class ServeShutdown : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sy_test_serve_shutdown_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 3, dir_).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> serve_args(const std::string& timeout) const {
    return {"serve", "--model", dir_.string(), "--port", "0", "--no-telemetry", "--no-console",
            "--shutdown-timeout", timeout};
  }

  // What a streamed answer held: its tokens, the last finish reason, an error code if any.
  struct Stream {
    std::int64_t tokens = 0;
    std::string finish, error;
  };
  // Streams `max_tokens` tokens (with `logprobs` alternatives each); `on_first` runs once, when
  // the first event arrives.
  static Stream stream(httplib::Client& c, int max_tokens, const std::function<void()>& on_first, int logprobs = 0) {
    Stream s;
    std::string buffer;
    bool first = true;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    json body{{"prompt", {1, 2, 3}}, {"max_tokens", max_tokens}, {"stream", true}, {"ignore_eos", true}};
    if (logprobs > 0) body["logprobs"] = logprobs;
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
      if (first) {
        first = false;
        on_first();
      }
      buffer.append(data, n);
      for (std::size_t end; (end = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, end + 2)) {
        const std::string event = buffer.substr(0, end);
        if (event.rfind("data: {", 0) != 0) continue;
        const json j = json::parse(event.substr(6));
        if (j.contains("error")) {
          s.error = j["error"].value("code", "");
          continue;
        }
        const json& choice = j["choices"][0];
        s.tokens += static_cast<std::int64_t>(choice["token_ids"].size());
        if (!choice["finish_reason"].is_null()) s.finish = choice["finish_reason"];
      }
      return true;
    };
    c.send(req);
    return s;
  }

  // Waits for the process to exit by itself (it is sent no signal): its wait status.
  static int exit_status(DemoProcess& p) { return p.stop(0); }

  fs::path dir_;
};

TEST_F(ServeShutdown, WithATimeoutTheOpenAnswersFinishAndNewOnesAre503) {
  DemoProcess serve(serve_args("60"));
  ASSERT_TRUE(serve.started());
  const std::string url = serve.wait_for("API at (http://127\\.0\\.0\\.1:[0-9]+)/v1");
  ASSERT_FALSE(url.empty()) << serve.output();
  httplib::Client c(url);
  c.set_read_timeout(60, 0);
  httplib::Client probe(url);
  int health = 0, refused = 0;
  std::string refusal;
  // The answer is larger than the sockets' buffers (1500 events of 20 log-probabilities), so
  // while this client reads nothing it cannot be sent to its end however fast the engine is:
  // the shutdown must wait for it, and the probes find the server up.
  const Stream s = stream(c, 1500, [&] {
    ::kill(serve.pid(), SIGTERM);
    // The door closes on the loop's next tick (0.1 s); the answer goes on meanwhile.
    ASSERT_FALSE(serve.wait_for("shutting down: no new requests").empty()) << serve.output();
    if (auto r = probe.Get("/health")) health = r->status;
    if (auto r = probe.Post("/v1/completions", R"({"prompt": [1], "max_tokens": 2})", "application/json")) {
      refused = r->status;
      refusal = json::parse(r->body)["error"].value("code", "");
    }
  }, 20);
  EXPECT_EQ(health, 503);
  EXPECT_EQ(refused, 503);
  EXPECT_EQ(refusal, "shutting_down");
  EXPECT_EQ(s.error, "") << "the open answer was cut";
  EXPECT_EQ(s.tokens, 1500);
  EXPECT_EQ(s.finish, "length");
  const int status = exit_status(serve);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << serve.output();
  EXPECT_NE(serve.output().find("interrupted:"), std::string::npos) << serve.output();
}

TEST_F(ServeShutdown, ASecondSignalOrNoTimeoutAnswersTheOpenOnes503AtOnce) {
  for (const bool second_signal : {false, true}) {
    DemoProcess serve(serve_args(second_signal ? "60" : "0"));
    ASSERT_TRUE(serve.started());
    const std::string url = serve.wait_for("API at (http://127\\.0\\.0\\.1:[0-9]+)/v1");
    ASSERT_FALSE(url.empty()) << serve.output();
    httplib::Client c(url);
    c.set_read_timeout(60, 0);
    // 2000 tokens take seconds on the tiny model; the signals come at the first.
    const Stream s = stream(c, 2000, [&] {
      ::kill(serve.pid(), SIGTERM);
      if (second_signal) {
        ASSERT_FALSE(serve.wait_for("shutting down: no new requests").empty()) << serve.output();
        ::kill(serve.pid(), SIGTERM);
      }
    });
    EXPECT_EQ(s.error, "shutting_down") << "second signal " << second_signal << ": " << s.tokens << " tokens";
    EXPECT_LT(s.tokens, 2000);
    const int status = exit_status(serve);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << serve.output();
  }
}

}  // namespace
}  // namespace sy
