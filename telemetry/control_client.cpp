#include "telemetry/control_client.h"

#include <atomic>
#include <cerrno>
#include <optional>

#include <zmq.hpp>

#include "telemetry/zmq_curve.h"

namespace sy::telemetry {

namespace {

class ZmqControlClient final : public ControlClient {
 public:
  ZmqControlClient(std::string endpoint, std::optional<CurveClientKeys> keys)
      : endpoint_(std::move(endpoint)), keys_(std::move(keys)) {}

  Status open() {
    try {
      socket_ = zmq::socket_t(context_, zmq::socket_type::dealer);
      socket_.set(zmq::sockopt::linger, 0);
      socket_.set(zmq::sockopt::sndhwm, 16);
      if (keys_) set_curve_client(socket_, *keys_);
      socket_.connect(endpoint_);
    } catch (const zmq::error_t& e) {
      return Status::Error("cannot connect to control endpoint " + endpoint_ + ": " + e.what());
    }
    return Status::Ok();
  }

  StatusOr<std::string> call(const std::string& request, std::chrono::milliseconds timeout) override {
    if (cancelled_.load()) return Status::Error("control endpoint " + endpoint_ + ": the client was cancelled");
    try {
      if (!socket_.send(zmq::buffer(request), zmq::send_flags::dontwait)) {
        return reset("cannot send to control endpoint " + endpoint_ + ": its queue is full");
      }
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, timeout) == 0) {
        return reset("no reply from control endpoint " + endpoint_ + " within " + std::to_string(timeout.count()) +
                     " ms");
      }
      zmq::message_t reply;
      if (!socket_.recv(reply, zmq::recv_flags::dontwait)) return reset("control reply vanished");
      // A REQ-style delimiter never comes to a DEALER that sent none, but skip one if a proxy adds it.
      while (reply.size() == 0 && reply.more()) {
        if (!socket_.recv(reply, zmq::recv_flags::dontwait)) return reset("control reply ended early");
      }
      std::string text = reply.to_string();
      while (reply.more()) (void)socket_.recv(reply, zmq::recv_flags::dontwait);
      return text;
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return Status::Error("control endpoint " + endpoint_ + ": the client was cancelled");
      return reset(std::string("control endpoint ") + endpoint_ + ": " + e.what());
    }
  }

  // Shutting the context down is what makes a zmq_poll blocked on another thread return (ETERM);
  // a flag alone would only be seen after the timeout.
  void cancel() override {
    cancelled_.store(true);
    context_.shutdown();
  }

 private:
  // After a timeout the old socket may still receive the late reply; a new socket makes sure
  // the next call gets its own answer and nothing else.
  Status reset(const std::string& message) {
    socket_.close();
    const Status reopened = open();
    return reopened.ok() ? Status::Error(message) : Status::Error(message + "; " + reopened.message());
  }

  std::string endpoint_;
  std::optional<CurveClientKeys> keys_;
  std::atomic<bool> cancelled_{false};
  zmq::context_t context_{1};
  zmq::socket_t socket_;
};

}  // namespace

StatusOr<std::unique_ptr<ControlClient>> ControlClient::connect(const std::string& endpoint,
                                                                const CurveClientKeys* keys) {
  if (Status s = check_client_endpoint("control", endpoint, keys); !s.ok()) return s;
  auto client = std::make_unique<ZmqControlClient>(endpoint, keys ? std::optional(*keys) : std::nullopt);
  if (Status s = client->open(); !s.ok()) return s;
  return std::unique_ptr<ControlClient>(std::move(client));
}

}  // namespace sy::telemetry
