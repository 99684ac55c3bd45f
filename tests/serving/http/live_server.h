// A cpu deployment serving on a wall-clock loop thread of its own with the HTTP API in front,
// for the HTTP tests; client helpers that can hang up mid-answer, and one that reads a streamed
// answer's events.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_deployment.h"
#include "engine/serving/http/api_server.h"
#include "engine/serving/http/request_broker.h"
#include "engine/serving/http/text_support.h"
#include "engine/serving/control_commands.h"
#include "engine/serving/telemetry_bridge.h"
#include "telemetry/telemetry_hub.h"

namespace sy::http {

// POSTs `body` and hands the answer's bytes to `receive` as they come; false hangs up.
inline httplib::Result post_streaming(httplib::Client& c, const std::string& body,
                               std::function<bool(const char*, std::size_t)> receive) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [receive](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    return receive(data, n);
  };
  return c.send(req);
}

// A streamed answer's server-sent events, for the tests that read one: each event as sent
// (without the blank line that ends it), the `data: {...}` ones parsed, how many `data: [DONE]`,
// how many others (neither those nor a `:` keep-alive), and what followed the last blank line.
struct SseEvents {
  std::vector<std::string> raw;
  std::vector<nlohmann::json> data;
  int done = 0;
  int other = 0;
  std::string tail;
};
inline SseEvents parse_sse(const std::string& body) {
  SseEvents out;
  std::size_t at = 0;
  for (std::size_t end; (end = body.find("\n\n", at)) != std::string::npos; at = end + 2) {
    std::string event = body.substr(at, end - at);
    if (event == "data: [DONE]")
      ++out.done;
    else if (event.rfind("data: {", 0) == 0)
      out.data.push_back(nlohmann::json::parse(event.substr(6)));
    else if (event.empty() || event[0] != ':')
      ++out.other;
    out.raw.push_back(std::move(event));
  }
  out.tail = body.substr(at);
  return out;
}

// A deployment serving on a thread of its own, the broker and the server in front of it.
class LiveServer {
 public:
  LiveServer(std::shared_ptr<const ModelWeights> weights, CoordinatorOptions co, ApiServerOptions o = {},
             const TextSupport* text = nullptr) {
    DeploymentOptions d;
    d.clock = Clock::Wall;
    d.coordinator = co;
    d.coordinator.keep_finished = false;
    d.kv_pages_per_rank = 256;
    d.page_size = 16;
    deployment_ = std::make_unique<CpuDeployment>(weights, Topology::colocated(weights->config(), 1), d);
    broker_ = std::make_unique<RequestBroker>(*deployment_);
    // The control commands, as `serve` answers them on its control socket (no socket here).
    hub_ = std::move(telemetry::TelemetryHub::start({})).value();
    RunInfo info;
    info.backend = "cpu";
    info.model = weights->config();
    bridge_ = std::make_unique<TelemetryBridge>(*deployment_, *hub_, nullptr, info, TelemetryBridge::Options{});
    commands_ = std::make_unique<ControlCommands>(*deployment_, *bridge_, *hub_, ControlCommands::Hooks{});
    deployment_->observers().add(nullptr, &finishes_);
    o.port = 0;
    const bool auto_tool_choice = o.model.auto_tool_choice;  // the one model setting a test chooses
    o.model = {"tiny", weights->config().max_position_embeddings, weights->config().vocab_size,
               weights->config().eos_token_id};
    o.model.auto_tool_choice = auto_tool_choice;
    o.registry = &registry_;
    o.text = text;
    if (text && text->eos_token_id()) o.model.eos_token_id = text->eos_token_id();
    registry_.counter("switchyard_test_total", "A counter only this test has").get().inc(3);
    auto server = ApiServer::start(o, *broker_);
    if (!server.ok()) throw std::runtime_error(server.status().message());
    server_ = std::move(server).value();
    thread_ = std::thread([this] {
      EventLoop& loop = deployment_->loop();
      std::function<void()> tick = [&] {
        if (!stop_) loop.post(loop.now() + 5'000'000, tick);
      };
      loop.post(0, tick);
      loop.run([this] { return stop_.load(); });
    });
  }
  ~LiveServer() {
    broker_->close();
    stop_ = true;
    thread_.join();
    server_.reset();
    commands_.reset();
    bridge_.reset();
  }

  int port() const { return server_->port(); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(30, 0);
    return c;
  }
  // Runs fn on the loop's thread and returns its result.
  template <class Fn>
  auto on_loop(Fn fn) {
    std::promise<decltype(fn())> p;
    auto f = p.get_future();
    deployment_->loop().post_external([&] { p.set_value(fn()); });
    return f.get();
  }
  // The control command get_state's reply, answered on the loop's thread.
  nlohmann::json control(const nlohmann::json& command) {
    std::promise<nlohmann::json> p;
    auto f = p.get_future();
    deployment_->loop().post_external([&] { commands_->handle(command, [&](const nlohmann::json& r) { p.set_value(r); }); });
    return f.get();
  }
  std::int64_t kv_pages_used() { return control({{"cmd", "get_state"}})["state"]["kv"]["pages_used"].get<std::int64_t>(); }
  // Waits up to 10 s for the KV pages to be free.
  bool kv_freed() {
    for (int i = 0; i < 1000; ++i) {
      if (kv_pages_used() == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  std::optional<FinishReason> finish_reason(std::int64_t id) {
    std::lock_guard lock(finishes_.m);
    const auto it = finishes_.reasons.find(id);
    return it == finishes_.reasons.end() ? std::nullopt : std::optional(it->second);
  }
  Coordinator& coordinator() { return deployment_->coordinator(); }
  RequestBroker& broker() { return *broker_; }

 private:
  struct Finishes : RequestObserver {
    std::mutex m;
    std::map<std::int64_t, FinishReason> reasons;
    void on_request(const RequestUpdate& u) override {
      std::lock_guard lock(m);
      if (u.phase == RequestPhase::Finished) reasons[u.id] = u.finish_reason;
    }
  } finishes_;
  telemetry::PrometheusRegistry registry_;
  std::unique_ptr<CpuDeployment> deployment_;
  std::unique_ptr<RequestBroker> broker_;
  std::unique_ptr<telemetry::TelemetryHub> hub_;
  std::unique_ptr<TelemetryBridge> bridge_;
  std::unique_ptr<ControlCommands> commands_;
  std::unique_ptr<ApiServer> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// POSTs `body` to /v1/completions and hangs up mid-answer: a streamed one (`"stream": true`) after
// `events` events, a whole one 20 ms after `open_requests` requests are open on the coordinator,
// long before their tokens are made (and expects no answer).
inline void post_and_hang_up(LiveServer& s, httplib::Client& c, const nlohmann::json& body, int events,
                             std::int64_t open_requests) {
  if (body.value("stream", false)) {
    int seen = 0;
    post_streaming(c, body.dump(), [&](const char* data, std::size_t n) {
      for (std::size_t i = 0; i + 1 < n; ++i) seen += data[i] == '\n' && data[i + 1] == '\n';
      return seen < events;  // then hang up
    });
    return;
  }
  std::thread give_up([&] {
    while (s.on_loop([&] { return s.coordinator().open_requests(); }) < open_requests)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    c.stop();
  });
  EXPECT_FALSE(c.Post("/v1/completions", body.dump(), "application/json"));
  give_up.join();
}

}  // namespace sy::http
