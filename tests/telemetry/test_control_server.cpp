#include "telemetry/control_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "telemetry/control_client.h"
#include "tests/telemetry/test_support.h"

namespace sy::telemetry {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::unique_ptr<ControlServer> start_server(ControlServer::Handler handler, ControlServerOptions options = {}) {
  if (options.endpoint.empty()) options.endpoint = "tcp://127.0.0.1:*";
  auto server = ControlServer::start(std::move(options), std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().message();
  return server.ok() ? std::move(server).value() : nullptr;
}

// Answers at once with the command echoed.
void echo(json command, ControlServer::Reply reply) { reply({{"ok", true}, {"echo", command}}); }

std::unique_ptr<ControlClient> client_for(const ControlServer& server) {
  auto client = ControlClient::connect(server.endpoint());
  EXPECT_TRUE(client.ok()) << client.status().message();
  return client.ok() ? std::move(client).value() : nullptr;
}

json call(ControlClient& client, const std::string& request, std::chrono::milliseconds timeout = 10s) {
  auto reply = client.call(request, timeout);
  EXPECT_TRUE(reply.ok()) << reply.status().message();
  if (!reply.ok()) return json();
  auto doc = json::parse(reply.value(), nullptr, false);
  EXPECT_TRUE(doc.is_object()) << reply.value();
  return doc;
}

std::string error_of(ControlClient& client, const std::string& request) {
  const json r = call(client, request);
  EXPECT_EQ(r.value("ok", true), false) << r.dump();
  return r.value("error", std::string("(no error)"));
}

TEST(ControlServer, ValidCommandsReachTheHandler) {
  auto server = start_server(echo);
  ASSERT_TRUE(server);
  auto client = client_for(*server);
  const json r = call(*client, R"({"cmd":"set_microbatches","m":3})");
  EXPECT_EQ(r["ok"], true);
  EXPECT_EQ(r["echo"]["cmd"], "set_microbatches");
  EXPECT_EQ(r["echo"]["m"], 3);
  EXPECT_EQ(server->counters().handled, 1u);
}

TEST(ControlServer, MalformedRequestsGetErrorsThatNameTheProblem) {
  std::atomic<int> handled{0};
  auto server = start_server([&](json c, ControlServer::Reply r) {
    ++handled;
    echo(std::move(c), std::move(r));
  });
  ASSERT_TRUE(server);
  auto client = client_for(*server);
  EXPECT_NE(error_of(*client, "hello").find("request is not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(*client, "{\"cmd\":").find("request is not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(*client, "[1,2]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(error_of(*client, "\"get_state\"").find("not a string"), std::string::npos);
  EXPECT_NE(error_of(*client, "{}").find("no \"cmd\" field"), std::string::npos);
  EXPECT_NE(error_of(*client, R"({"cmd":5})").find("\"cmd\" must be a string, not a number"), std::string::npos);
  EXPECT_NE(error_of(*client, R"({"cmd":["pause"]})").find("not an array"), std::string::npos);
  EXPECT_NE(error_of(*client, R"({"cmd":""})").find("empty"), std::string::npos);
  EXPECT_NE(error_of(*client, "").find("empty request"), std::string::npos);
  EXPECT_NE(error_of(*client, "{\"cmd\":\"p\xc3\x28\"}").find("not valid UTF-8 (byte 9)"), std::string::npos);
  EXPECT_NE(error_of(*client, "{\"cmd\":\"\xed\xa0\x80\"}").find("not valid UTF-8"), std::string::npos);  // surrogate
  EXPECT_NE(error_of(*client, std::string(100, '[') + std::string(100, ']')).find("nests deeper than 64"),
            std::string::npos);
  std::string big = R"({"cmd":"set_placement","pad":")" + std::string(70000, 'x') + "\"}";
  EXPECT_NE(error_of(*client, big).find("request of " + std::to_string(big.size()) +
                                        " bytes exceeds the 65536-byte limit"),
            std::string::npos);
  EXPECT_EQ(handled.load(), 0);
  EXPECT_EQ(server->counters().invalid, 13u);
  // And serving goes on.
  EXPECT_EQ(call(*client, R"({"cmd":"pause"})")["ok"], true);
  EXPECT_EQ(handled.load(), 1);
}

// Regression: a number outside a double's range escaped the parser's error handling (nlohmann
// throws out_of_range, not parse_error) and terminated the engine.
TEST(ControlServer, NumbersOutsideADoublesRangeAreAnErrorNotAnAbort) {
  std::atomic<int> handled{0};
  auto server = start_server([&](json c, ControlServer::Reply r) {
    ++handled;
    echo(std::move(c), std::move(r));
  });
  ASSERT_TRUE(server);
  auto client = client_for(*server);
  for (const char* request : {R"({"cmd":"get_state","x":1e400})", R"({"cmd":"get_state","x":-1e400})",
                              R"({"x":[1E+99999],"cmd":"pause"})", R"({"cmd":"set_microbatches","m":1e309})"}) {
    const std::string error = error_of(*client, request);
    EXPECT_NE(error.find("request is not valid JSON"), std::string::npos) << request << ": " << error;
    EXPECT_NE(error.find("range of a double"), std::string::npos) << request << ": " << error;
  }
  EXPECT_EQ(handled.load(), 0);
  EXPECT_EQ(call(*client, R"({"cmd":"get_state","x":1e300})")["ok"], true);
  EXPECT_EQ(handled.load(), 1);
}

TEST(ControlServer, RefusesUnknownCommandsWhenGivenTheList) {
  ControlServerOptions options;
  options.known_commands = {"pause", "resume"};
  auto server = start_server(echo, options);
  ASSERT_TRUE(server);
  auto client = client_for(*server);
  EXPECT_EQ(error_of(*client, R"({"cmd":"reboot"})"), "unknown command 'reboot'; known commands: pause, resume");
  EXPECT_EQ(call(*client, R"({"cmd":"resume"})")["ok"], true);
}

// Raw sockets send what ControlClient never would: several frames, REQ envelopes.
TEST(ControlServer, FramingIsCheckedAndReqClientsWork) {
  auto server = start_server(echo);
  ASSERT_TRUE(server);
  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::rcvtimeo, 10000);
  dealer.connect(server->endpoint());
  std::array<zmq::const_buffer, 2> two = {zmq::str_buffer("{\"cmd\":\"pause\"}"), zmq::str_buffer("{}")};
  zmq::send_multipart(dealer, two);
  std::vector<zmq::message_t> reply;
  ASSERT_TRUE(zmq::recv_multipart(dealer, std::back_inserter(reply)));
  ASSERT_EQ(reply.size(), 1u);
  EXPECT_NE(reply[0].to_string().find("request has 2 frames; send the JSON command as a single frame"),
            std::string::npos);

  zmq::socket_t req(ctx, zmq::socket_type::req);
  req.set(zmq::sockopt::linger, 0);
  req.set(zmq::sockopt::rcvtimeo, 10000);
  req.connect(server->endpoint());
  req.send(zmq::str_buffer(R"({"cmd":"get_state"})"));
  zmq::message_t answer;
  ASSERT_TRUE(req.recv(answer));
  EXPECT_EQ(json::parse(answer.to_string())["echo"]["cmd"], "get_state");
}

TEST(ControlServer, MessagesBeyondTheHardCeilingDropOnlyThatConnection) {
  auto server = start_server(echo);
  ASSERT_TRUE(server);
  zmq::context_t ctx;
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.connect(server->endpoint());
  const std::string huge(ControlServer::kMaxMessageBytes + 1, 'x');
  dealer.send(zmq::buffer(huge));
  auto client = client_for(*server);
  EXPECT_EQ(call(*client, R"({"cmd":"pause"})")["ok"], true);
}

TEST(ControlServer, AnswersForAHandlerThatNeverReplies) {
  std::mutex mu;
  std::vector<ControlServer::Reply> held;
  ControlServerOptions options;
  options.handler_timeout = 200ms;
  auto server = start_server(
      [&](json, ControlServer::Reply r) {
        std::lock_guard lock(mu);
        held.push_back(r);
      },
      options);
  ASSERT_TRUE(server);
  auto client = client_for(*server);
  EXPECT_EQ(error_of(*client, R"({"cmd":"set_policy"})"),
            "timed out: the engine did not answer 'set_policy' within 200 ms");
  EXPECT_EQ(server->counters().timeouts, 1u);
  // The handler's late answer goes nowhere (and is counted), and the server keeps working.
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(held.size(), 1u);
    held[0]({{"ok", true}});
  }
  ASSERT_TRUE(testing::eventually([&] { return server->counters().late_replies == 1; }));
  EXPECT_NE(error_of(*client, R"({"cmd":"pause"})").find("timed out"), std::string::npos);
}

TEST(ControlServer, RepliesMayComeLaterFromAnotherThread) {
  std::vector<std::thread> workers;
  std::mutex mu;
  auto server = start_server([&](json c, ControlServer::Reply r) {
    std::lock_guard lock(mu);
    workers.emplace_back([c, r] {
      std::this_thread::sleep_for(50ms);
      r({{"ok", true}, {"late", c["cmd"]}});
      r({{"ok", false}, {"error", "second reply: ignored"}});
    });
  });
  ASSERT_TRUE(server);
  auto client = client_for(*server);
  EXPECT_EQ(call(*client, R"({"cmd":"record_stop"})")["late"], "record_stop");
  EXPECT_EQ(call(*client, R"({"cmd":"resume"})")["late"], "resume");
  std::lock_guard lock(mu);
  for (auto& t : workers) t.join();
}

TEST(ControlServer, HandlerExceptionsAndMalformedRepliesBecomeErrors) {
  auto server = start_server([](json c, ControlServer::Reply r) {
    if (c["cmd"] == "throw") throw std::runtime_error("placement has 3 blocks, model has 4");
    if (c["cmd"] == "array") r(json::array({1, 2}));
    if (c["cmd"] == "no_ok") r({{"state", 1}});
  });
  ASSERT_TRUE(server);
  auto client = client_for(*server);
  EXPECT_EQ(error_of(*client, R"({"cmd":"throw"})"),
            "internal error handling 'throw': placement has 3 blocks, model has 4");
  EXPECT_NE(error_of(*client, R"({"cmd":"array"})").find("not an object with \"ok\""), std::string::npos);
  EXPECT_NE(error_of(*client, R"({"cmd":"no_ok"})").find("not an object with \"ok\""), std::string::npos);
}

TEST(ControlServer, AFloodBeyondThePendingCapIsAnsweredBusy) {
  std::mutex mu;
  std::vector<ControlServer::Reply> held;
  ControlServerOptions options;
  options.max_pending = 3;
  options.max_pending_per_client = 2;
  auto server = start_server(
      [&](json, ControlServer::Reply r) {
        std::lock_guard lock(mu);
        held.push_back(r);
      },
      options);
  ASSERT_TRUE(server);
  zmq::context_t ctx;
  auto dealer = [&] {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, 10000);
    s.connect(server->endpoint());
    return s;
  };
  zmq::socket_t a = dealer();
  for (int i = 0; i < 5; ++i) a.send(zmq::str_buffer(R"({"cmd":"get_state"})"));
  // Client a may hold 2 pending: the other 3 are refused at once.
  for (int i = 0; i < 3; ++i) {
    zmq::message_t m;
    ASSERT_TRUE(a.recv(m));
    EXPECT_NE(m.to_string().find("busy"), std::string::npos) << m.to_string();
  }
  zmq::socket_t b = dealer();
  for (int i = 0; i < 2; ++i) b.send(zmq::str_buffer(R"({"cmd":"get_state"})"));
  // Pending is 3 after b's first: b's second is refused by the total cap.
  zmq::message_t m;
  ASSERT_TRUE(b.recv(m));
  EXPECT_NE(m.to_string().find("busy: 3 requests are pending"), std::string::npos) << m.to_string();
  EXPECT_EQ(server->counters().busy, 4u);
  ASSERT_TRUE(testing::eventually([&] {
    std::lock_guard lock(mu);
    return held.size() == 3;
  }));
  {
    std::lock_guard lock(mu);
    for (auto& r : held) r({{"ok", true}});
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(a.recv(m));
    EXPECT_EQ(m.to_string(), R"({"ok":true})");
  }
  ASSERT_TRUE(b.recv(m));
  EXPECT_EQ(m.to_string(), R"({"ok":true})");
  // With the backlog answered, the same client is served again.
  auto client = client_for(*server);
  std::thread answer([&] {
    testing::eventually([&] {
      std::lock_guard lock(mu);
      return held.size() == 4;
    });
    std::lock_guard lock(mu);
    held.back()({{"ok", true}, {"again", true}});
  });
  EXPECT_EQ(call(*client, R"({"cmd":"get_state"})")["again"], true);
  answer.join();
}

TEST(ControlServer, ManyClientsEachGetTheirOwnReplies) {
  auto server = start_server(echo);
  ASSERT_TRUE(server);
  constexpr int kClients = 8, kCalls = 50;
  std::atomic<int> correct{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = ControlClient::connect(server->endpoint());
      if (!client.ok()) return;
      for (int i = 0; i < kCalls; ++i) {
        const json request = {{"cmd", "get_state"}, {"client", c}, {"i", i}};
        auto reply = (*client)->call(request.dump(), 10s);
        if (!reply.ok()) continue;
        const json r = json::parse(*reply, nullptr, false);
        if (r.is_object() && r["echo"] == request) ++correct;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(correct.load(), kClients * kCalls);
}

TEST(ControlClient, ATimeoutDoesNotLeaveTheClientStuck) {
  std::vector<std::thread> workers;
  std::mutex mu;
  auto server = start_server([&](json c, ControlServer::Reply r) {
    if (c["cmd"] != "slow") return r({{"ok", true}, {"cmd", c["cmd"]}});
    std::lock_guard lock(mu);
    workers.emplace_back([r] {
      std::this_thread::sleep_for(300ms);
      r({{"ok", true}, {"cmd", "slow"}});
    });
  });
  ASSERT_TRUE(server);
  auto client = client_for(*server);
  auto first = client->call(R"({"cmd":"slow"})", 50ms);
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find("no reply from control endpoint"), std::string::npos);
  // The late reply to "slow" must never be taken for this call's.
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(call(*client, R"({"cmd":"fast"})")["cmd"], "fast");
  std::lock_guard lock(mu);
  for (auto& t : workers) t.join();
}

TEST(ControlClient, NoServerMeansATimeoutNotAHang) {
  auto client = ControlClient::connect("tcp://127.0.0.1:1");
  ASSERT_TRUE(client.ok());
  auto r = (*client)->call(R"({"cmd":"get_state"})", 100ms);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tcp://127.0.0.1:1"), std::string::npos);
  auto bad = ControlClient::connect("127.0.0.1:5556");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not tcp://"), std::string::npos);
}

// A console disconnecting must not sit out the timeout of a command nobody answers.
TEST(ControlClient, CancelEndsACallInProgressAndTheCallsAfterIt) {
  auto client = ControlClient::connect("tcp://127.0.0.1:1");  // nothing listens: no reply ever
  ASSERT_TRUE(client.ok());
  std::atomic<bool> entered{false};
  StatusOr<std::string> in_flight = Status::Error("not called");
  std::thread caller([&] {
    entered = true;
    in_flight = (*client)->call(R"({"cmd":"get_state"})", 60s);
  });
  while (!entered) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(100ms);  // inside the poll for the reply
  (*client)->cancel();
  caller.join();  // without cancel() this would wait the full 60 s
  ASSERT_FALSE(in_flight.ok());
  EXPECT_NE(in_flight.status().message().find("cancelled"), std::string::npos) << in_flight.status().message();
  auto later = (*client)->call(R"({"cmd":"get_state"})", 60s);
  ASSERT_FALSE(later.ok());
  EXPECT_NE(later.status().message().find("cancelled"), std::string::npos) << later.status().message();
  (*client)->cancel();  // twice is harmless
}

TEST(ControlServer, ParseRequestIsTheSameValidation) {
  ControlServerOptions limits;
  limits.max_request_bytes = 10;
  auto r = ControlServer::parse_request(R"({"cmd":"pause"})", limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "request of 15 bytes exceeds the 10-byte limit");
  limits.max_request_bytes = 100;
  r = ControlServer::parse_request(R"({"cmd":"pause","x":[1]})", limits);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["x"][0], 1);
}

}  // namespace
}  // namespace sy::telemetry
