#include "telemetry/zap_handler.h"

#include <algorithm>
#include <cstring>
#include <future>

#include <zmq_addon.hpp>

namespace sy::telemetry {

namespace {
constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
}

StatusOr<std::unique_ptr<ZapHandler>> ZapHandler::start(zmq::context_t& context,
                                                        const std::vector<std::string>& authorized_z85) {
  std::unique_ptr<ZapHandler> handler(new ZapHandler());
  for (const std::string& key : authorized_z85) {
    std::array<std::uint8_t, 32> bytes{};
    if (key.size() != 40 || zmq_z85_decode(bytes.data(), key.c_str()) == nullptr) {
      return Status::Error("authorised client key '" + key + "' is not a Z85 CURVE key");
    }
    handler->authorized_.push_back(bytes);
  }
  // The socket lives on the handler's thread from birth; the bind result comes back here.
  auto bound = std::make_shared<std::promise<std::string>>();
  auto result = bound->get_future();
  ZapHandler* self = handler.get();
  handler->thread_ = std::thread([self, &context, bound] {
    zmq::socket_t socket;
    try {
      socket = zmq::socket_t(context, zmq::socket_type::rep);
      socket.set(zmq::sockopt::linger, 0);
      socket.bind(kZapEndpoint);
    } catch (const zmq::error_t& e) {
      bound->set_value(std::string("cannot bind the ZAP handler: ") + e.what());
      return;
    }
    bound->set_value("");
    self->run(socket);
  });
  const std::string error = result.get();
  if (!error.empty()) {
    handler->thread_.join();
    return Status::Error(error);
  }
  return handler;
}

ZapHandler::~ZapHandler() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ZapHandler::run(zmq::socket_t& socket) {
  while (!stop_.load()) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) == 0) continue;
      std::vector<zmq::message_t> request;
      if (!zmq::recv_multipart(socket, std::back_inserter(request), zmq::recv_flags::dontwait)) continue;
      // RFC 27: version, request id, domain, address, routing id, mechanism, credentials…
      std::string request_id = request.size() > 1 ? request[1].to_string() : std::string();
      bool ok = false;
      if (request.size() >= 7 && request[0].to_string_view() == "1.0" && request[5].to_string_view() == "CURVE" &&
          request[6].size() == 32) {
        const auto* key = static_cast<const std::uint8_t*>(request[6].data());
        ok = std::any_of(authorized_.begin(), authorized_.end(),
                         [&](const auto& k) { return std::memcmp(k.data(), key, 32) == 0; });
      }
      (ok ? accepted_ : refused_)++;
      std::array<zmq::const_buffer, 6> reply = {
          zmq::str_buffer("1.0"),
          zmq::buffer(request_id),
          ok ? zmq::str_buffer("200") : zmq::str_buffer("400"),
          ok ? zmq::str_buffer("OK") : zmq::str_buffer("client key not authorised"),
          zmq::str_buffer(""),
          zmq::str_buffer(""),
      };
      zmq::send_multipart(socket, reply);
    } catch (const zmq::error_t&) {
      // ETERM while the context shuts down; anything else: keep serving the next request.
      if (zmq_errno() == ETERM) return;
    }
  }
}

}  // namespace sy::telemetry
