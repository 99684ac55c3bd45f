// The HTTP API as a hostile client meets it (issue 15): idle and slow connections, bytes that
// are not HTTP, lying or oversized bodies, and a burst of garbage. After each, the server still
// answers /health and a completion: nothing here may stall it for good or take it down.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/random_model.h"
#include "tests/serving/http/live_server.h"

namespace sy::http {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A raw TCP connection to the server; closed when it goes.
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  bool connected() const { return connected_; }
  void send(const std::string& bytes) { (void)!::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  // Nothing more will come: the server sees the end of the request stream.
  void finish_sending() { ::shutdown(fd_, SHUT_WR); }
  // What the server answers before it closes (or 5 s pass).
  std::string receive() {
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

 private:
  int fd_;
  bool connected_ = false;
};

class ApiHostileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("sy_test_http_hostile_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 1, dir_).ok());
    weights_ = *ModelWeights::load(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // /health and a two-token completion both answer.
  static void expect_serving(LiveServer& s) {
    auto c = s.client();
    auto health = c.Get("/health");
    ASSERT_TRUE(health) << "no answer to /health";
    EXPECT_EQ(health->status, 200);
    auto res = c.Post("/v1/completions", json{{"prompt", {1, 2, 3}}, {"max_tokens", 2}}.dump(), "application/json");
    ASSERT_TRUE(res) << "no answer to a completion";
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(json::parse(res->body)["usage"]["completion_tokens"], 2);
  }

  static inline fs::path dir_;
  static inline std::shared_ptr<const ModelWeights> weights_;
};

TEST_F(ApiHostileTest, IdleAndSlowConnectionsBeyondTheWorkersDoNotStallItForGood) {
  // Four workers and 1 s timeouts: sixteen connections that never send or never finish a
  // request occupy every worker in turn, and the timeouts must free them.
  ApiServerOptions o;
  o.workers = 4;
  o.read_timeout_s = 1;
  o.keep_alive_timeout_s = 1;
  LiveServer s(weights_, {}, o);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 16; ++i) {
    idle.push_back(std::make_unique<RawConnection>(s.port()));
    ASSERT_TRUE(idle.back()->connected());
    if (i % 2) idle.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro");
  }
  expect_serving(s);
}

TEST_F(ApiHostileTest, BytesThatAreNotHttpAreAnsweredOrDropped) {
  ApiServerOptions o;
  o.read_timeout_s = 1;
  o.keep_alive_timeout_s = 1;
  LiveServer s(weights_, {}, o);
  const std::vector<std::string> garbage = {
      std::string("\x00\x01\x02\xff\xfe\r\n\r\n", 9),
      "GET\r\n\r\n",
      "GET / HTTP/9.9\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n{}",
      "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
      "GET /health HTTP/1.1\r\nHost: " + std::string(100000, 'h') + "\r\n\r\n",
      "POST /v1/chat/completions HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{\"messages\":",
  };
  for (const std::string& g : garbage) {
    RawConnection c(s.port());
    ASSERT_TRUE(c.connected());
    c.send(g);
    c.finish_sending();
    const std::string answer = c.receive();
    // Either no answer (dropped) or an HTTP error status, never a success for garbage.
    if (!answer.empty()) {
      EXPECT_EQ(answer.rfind("HTTP/1.1 ", 0), 0u) << answer.substr(0, 80);
      EXPECT_EQ(answer.find("HTTP/1.1 200"), std::string::npos) << "garbage answered 200: " << g.substr(0, 60);
    }
  }
  expect_serving(s);
}

TEST_F(ApiHostileTest, BodiesBeyondTheLimitAndHostileJsonAreRefused) {
  LiveServer s(weights_, {});
  auto c = s.client();
  // Beyond the 16 MiB body limit.
  auto big = c.Post("/v1/completions", std::string(17 * 1024 * 1024, ' '), "application/json");
  if (big) {
    EXPECT_GE(big->status, 400);
  }
  const std::vector<std::string> bodies = {
      "[" + std::string(100000, '[') + std::string(100000, ']') + "]",  // nesting
      R"({"prompt": [1], "max_tokens": 1e400})",
      R"({"prompt": [1], "temperature": -1e99999})",
      R"({"prompt": [4294967296]})",
      R"({"prompt": [-1]})",
      R"({"prompt": "\ud800"})",
      R"({"messages": [{"role": "user", "content": {"a": 1}}]})",
      R"({"prompt": [1], "stop": [[[]]]})",
      R"({"prompt": [1], "seed": 1e30})",
      "{\"prompt\": \"\xff\xfe\"}",
      "{\"prompt\": [2], \"max_t\xe8kens\": 63}",  // an unknown field echoed in the error
  };
  for (const std::string& b : bodies) {
    for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
      auto res = c.Post(path, b, "application/json");
      ASSERT_TRUE(res) << path << " " << b.substr(0, 60);
      EXPECT_GE(res->status, 400) << path << " " << b.substr(0, 60) << ": " << res->body.substr(0, 200);
      EXPECT_LT(res->status, 500) << path << " " << b.substr(0, 60) << ": " << res->body.substr(0, 200);
      const json e = json::parse(res->body, nullptr, false);
      ASSERT_TRUE(e.is_object()) << res->body.substr(0, 200);
      EXPECT_TRUE(e["error"]["message"].is_string()) << res->body.substr(0, 200);
    }
  }
  expect_serving(s);
}

}  // namespace
}  // namespace sy::http
