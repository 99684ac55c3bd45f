#include "telemetry/control_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "base/json_parse.h"
#include "telemetry/endpoint.h"
#include "telemetry/zap_handler.h"
#include "telemetry/zmq_curve.h"

namespace sy::telemetry {

using nlohmann::json;

namespace {

std::string type_name(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "a number";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "something else";
  }
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string error_text(const std::string& message) { return dump(json{{"ok", false}, {"error", message}}); }

// Offset of the first byte that breaks UTF-8 (overlongs, surrogates and values past U+10FFFF
// included), or npos.
std::size_t invalid_utf8_at(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07u;
    } else {
      return i;
    }
    if (i + n >= s.size()) return i;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3Fu);
    }
    const std::uint32_t min[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n + 1;
  }
  return std::string_view::npos;
}

// Deepest bracket nesting outside strings; the parser and every later dump recurse that deep.
int nesting_depth(std::string_view s) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}


}  // namespace

StatusOr<json> ControlServer::parse_request(std::string_view body, const ControlServerOptions& limits) {
  if (body.size() > limits.max_request_bytes) {
    return Status::Error("request of " + std::to_string(body.size()) + " bytes exceeds the " +
                         std::to_string(limits.max_request_bytes) + "-byte limit");
  }
  if (body.empty()) return Status::Error("empty request: send one JSON object such as {\"cmd\":\"get_state\"}");
  if (const std::size_t at = invalid_utf8_at(body); at != std::string_view::npos) {
    return Status::Error("request is not valid UTF-8 (byte " + std::to_string(at) + ")");
  }
  if (nesting_depth(body) > limits.max_depth) {
    return Status::Error("request nests deeper than " + std::to_string(limits.max_depth) + " levels");
  }
  auto parsed = parse_json(body);
  if (!parsed.ok()) return Status::Error("request is not valid JSON: " + parsed.status().message());
  json doc = std::move(parsed).value();
  if (!doc.is_object()) {
    return Status::Error("request must be a JSON object with a string \"cmd\" field, not " + type_name(doc));
  }
  const auto cmd = doc.find("cmd");
  if (cmd == doc.end()) return Status::Error("request has no \"cmd\" field");
  if (!cmd->is_string()) return Status::Error("\"cmd\" must be a string, not " + type_name(*cmd));
  const std::string& name = cmd->get_ref<const std::string&>();
  if (name.empty()) return Status::Error("\"cmd\" is empty");
  if (!limits.known_commands.empty() &&
      std::find(limits.known_commands.begin(), limits.known_commands.end(), name) == limits.known_commands.end()) {
    std::string list;
    for (const auto& c : limits.known_commands) list += (list.empty() ? "" : ", ") + c;
    return Status::Error("unknown command '" + name.substr(0, 64) + "'; known commands: " + list);
  }
  return doc;
}

struct ControlServer::Reply::Slot {
  std::weak_ptr<Core> core;
  std::uint64_t id = 0;
  std::string cmd;
  std::atomic<bool> done{false};
};

struct ControlServer::Core {
  ControlServerOptions options;
  Handler handler;
  std::string endpoint;

  zmq::context_t context{1};
  std::unique_ptr<ZapHandler> zap;
  zmq::socket_t socket;
  int wake_fd = -1;  // eventfd: replies and stop requests wake the I/O thread's poll

  std::mutex outbox_mutex;
  std::vector<std::pair<std::uint64_t, std::string>> outbox;
  std::atomic<bool> stopping{false};

  std::mutex dispatch_mutex;
  std::condition_variable dispatch_cv;
  std::deque<std::pair<json, Reply>> dispatch_queue;

  std::atomic<std::uint64_t> requests{0}, handled{0}, invalid{0}, busy{0}, timeouts{0}, late_replies{0};

  std::thread io_thread;
  std::thread dispatch_thread;

  ~Core() {
    if (wake_fd >= 0) ::close(wake_fd);
  }

  void wake() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(wake_fd, &one, sizeof one);
  }

  void post_reply(std::uint64_t id, std::string text) {
    {
      std::lock_guard lock(outbox_mutex);
      outbox.emplace_back(id, std::move(text));
    }
    wake();
  }

  // --- the I/O thread: owns the socket and the table of pending requests ---

  struct Pending {
    std::vector<std::string> route;  // identity frame, then the REQ delimiter when the client is a REQ
    std::string cmd;
    std::chrono::steady_clock::time_point deadline;
  };
  std::map<std::uint64_t, Pending> pending;  // ids grow with time, so the first deadline is first
  std::unordered_map<std::string, std::size_t> pending_per_client;
  std::uint64_t next_id = 1;

  void send(const std::vector<std::string>& route, const std::string& text) {
    try {
      for (const auto& frame : route) socket.send(zmq::buffer(frame), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      socket.send(zmq::buffer(text), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // The client is gone or not reading; its reply is dropped, serving goes on.
    }
  }

  void finish(std::map<std::uint64_t, Pending>::iterator it, const std::string& text) {
    send(it->second.route, text);
    auto c = pending_per_client.find(it->second.route.front());
    if (c != pending_per_client.end() && --c->second == 0) pending_per_client.erase(c);
    pending.erase(it);
  }

  void receive(std::vector<zmq::message_t>& frames) {
    ++requests;
    std::vector<std::string> route{frames[0].to_string()};
    std::size_t body_begin = 1;
    // A REQ client puts an empty delimiter before its body; DEALER clients (ours) do not.
    if (frames.size() >= 3 && frames[1].size() == 0) {
      route.emplace_back();
      body_begin = 2;
    }
    const std::size_t parts = frames.size() - body_begin;
    if (parts != 1) {
      ++invalid;
      send(route, error_text(parts == 0 ? "empty request: send one JSON object such as {\"cmd\":\"get_state\"}"
                                        : "request has " + std::to_string(parts) +
                                              " frames; send the JSON command as a single frame"));
      return;
    }
    auto command = parse_request(frames[body_begin].to_string_view(), options);
    if (!command.ok()) {
      ++invalid;
      send(route, error_text(command.status().message()));
      return;
    }
    const std::string cmd = (*command)["cmd"].get<std::string>();
    std::size_t& mine = pending_per_client[route.front()];
    if (pending.size() >= options.max_pending || mine >= options.max_pending_per_client) {
      if (mine == 0) pending_per_client.erase(route.front());
      ++busy;
      send(route, error_text("busy: " + std::to_string(pending.size()) +
                             " requests are pending; retry after they are answered"));
      return;
    }
    ++mine;
    const std::uint64_t id = next_id++;
    pending[id] = Pending{std::move(route), cmd, std::chrono::steady_clock::now() + options.handler_timeout};
    auto slot = std::make_shared<Reply::Slot>();
    slot->core = core_self;
    slot->id = id;
    slot->cmd = cmd;
    Reply reply(std::move(slot));
    {
      std::lock_guard lock(dispatch_mutex);
      dispatch_queue.emplace_back(std::move(command).value(), std::move(reply));
    }
    dispatch_cv.notify_one();
    ++handled;
  }

  void deliver_replies() {
    std::vector<std::pair<std::uint64_t, std::string>> ready;
    {
      std::lock_guard lock(outbox_mutex);
      ready.swap(outbox);
    }
    for (auto& [id, text] : ready) {
      auto it = pending.find(id);
      if (it == pending.end()) {
        ++late_replies;
      } else {
        finish(it, text);
      }
    }
  }

  void expire(std::chrono::steady_clock::time_point now) {
    while (!pending.empty() && pending.begin()->second.deadline <= now) {
      auto it = pending.begin();
      ++timeouts;
      finish(it, error_text("timed out: the engine did not answer '" + it->second.cmd + "' within " +
                            std::to_string(options.handler_timeout.count()) + " ms"));
    }
  }

  void run_io() {
    std::vector<zmq::message_t> frames;
    while (!stopping.load()) {
      zmq::pollitem_t items[2] = {{socket.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd, ZMQ_POLLIN, 0}};
      auto timeout = std::chrono::milliseconds(1000);
      if (!pending.empty()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(pending.begin()->second.deadline -
                                                                                std::chrono::steady_clock::now()) +
                          std::chrono::milliseconds(1);
        timeout = std::clamp(left, std::chrono::milliseconds(0), timeout);
      }
      try {
        zmq::poll(items, 2, timeout);
        if (items[1].revents & ZMQ_POLLIN) {
          std::uint64_t count = 0;
          [[maybe_unused]] const auto n = ::read(wake_fd, &count, sizeof count);
        }
        deliver_replies();
        // A bounded number per round, so replies and timeouts keep flowing under a flood.
        for (int i = 0; i < 256; ++i) {
          frames.clear();
          if (!zmq::recv_multipart(socket, std::back_inserter(frames), zmq::recv_flags::dontwait)) break;
          if (!frames.empty()) receive(frames);
        }
        expire(std::chrono::steady_clock::now());
      } catch (const zmq::error_t&) {
        if (stopping.load()) break;
      }
    }
    socket.close();
  }

  // --- the dispatch thread: calls the handler, one request at a time ---

  void run_dispatch() {
    while (true) {
      std::pair<json, Reply> job;
      {
        std::unique_lock lock(dispatch_mutex);
        dispatch_cv.wait(lock, [&] { return stopping.load() || !dispatch_queue.empty(); });
        if (stopping.load()) return;
        job = std::move(dispatch_queue.front());
        dispatch_queue.pop_front();
      }
      const std::string cmd = job.first["cmd"].get<std::string>();
      try {
        handler(std::move(job.first), job.second);
      } catch (const std::exception& e) {
        job.second.error("internal error handling '" + cmd + "': " + e.what());
      } catch (...) {
        job.second.error("internal error handling '" + cmd + "'");
      }
    }
  }

  std::weak_ptr<Core> core_self;
};

void ControlServer::Reply::operator()(const json& reply) const {
  if (!slot_ || slot_->done.exchange(true)) return;
  auto core = slot_->core.lock();
  if (!core) return;
  std::string text;
  if (reply.is_object() && reply.contains("ok") && reply["ok"].is_boolean()) {
    text = dump(reply);
  } else {
    text = error_text("internal error: the engine's reply to '" + slot_->cmd + "' was not an object with \"ok\"");
  }
  core->post_reply(slot_->id, std::move(text));
}

void ControlServer::Reply::error(const std::string& message) const { (*this)(json{{"ok", false}, {"error", message}}); }

ControlServer::ControlServer(std::shared_ptr<Core> core) : core_(std::move(core)) {}

StatusOr<std::unique_ptr<ControlServer>> ControlServer::start(ControlServerOptions options, Handler handler) {
  if (!handler) return Status::Error("control server needs a handler");
  auto core = std::make_shared<Core>();
  core->core_self = core;
  core->handler = std::move(handler);
  const std::string what = "control endpoint " + options.endpoint;
  core->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (core->wake_fd < 0) return Status::Error(what + ": cannot create an eventfd");
  try {
    if (options.curve) {
      if (Status s = validate(*options.curve); !s.ok()) return Status::Error(what + ": " + s.message());
      auto zap = ZapHandler::start(core->context, options.curve->authorized_clients);
      if (!zap.ok()) return Status::Error(what + ": " + zap.status().message());
      core->zap = std::move(zap).value();
    }
    core->socket = zmq::socket_t(core->context, zmq::socket_type::router);
    core->socket.set(zmq::sockopt::linger, 0);
    core->socket.set(zmq::sockopt::maxmsgsize, kMaxMessageBytes);
    core->socket.set(zmq::sockopt::rcvhwm, 1000);
    core->socket.set(zmq::sockopt::sndhwm, 1000);
    if (options.curve) set_curve_server(core->socket, *options.curve);
    core->socket.bind(zmq_bind_endpoint(options.endpoint));
    core->endpoint = core->socket.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Error("cannot listen on " + what + ": " + e.what());
  }
  core->options = std::move(options);
  Core* raw = core.get();
  // The socket was made here; handing it to the I/O thread is allowed with the barrier a
  // thread start gives, and from then on only that thread touches it.
  core->io_thread = std::thread([raw] { raw->run_io(); });
  core->dispatch_thread = std::thread([raw] { raw->run_dispatch(); });
  return std::unique_ptr<ControlServer>(new ControlServer(std::move(core)));
}

ControlServer::~ControlServer() {
  core_->stopping = true;
  core_->wake();
  core_->dispatch_cv.notify_all();
  if (core_->io_thread.joinable()) core_->io_thread.join();
  {
    // Take the lock so the notify cannot fall between the dispatch thread's check and its wait.
    std::lock_guard lock(core_->dispatch_mutex);
  }
  core_->dispatch_cv.notify_all();
  if (core_->dispatch_thread.joinable()) core_->dispatch_thread.join();
  core_->zap.reset();
}

const std::string& ControlServer::endpoint() const { return core_->endpoint; }

ControlServerCounters ControlServer::counters() const {
  ControlServerCounters c;
  c.requests = core_->requests;
  c.handled = core_->handled;
  c.invalid = core_->invalid;
  c.busy = core_->busy;
  c.timeouts = core_->timeouts;
  c.late_replies = core_->late_replies;
  return c;
}

}  // namespace sy::telemetry
