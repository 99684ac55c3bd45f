#include "engine/dist/process_links.h"

#include <chrono>
#include <cstdio>

namespace sy::dist {

ProcessLinks::ProcessLinks(Rendezvous rendezvous, std::int32_t rank) : rank_(rank), rendezvous_(std::move(rendezvous)) {
  for (std::int32_t r = 0; r < static_cast<std::int32_t>(rendezvous_.endpoints.size()); ++r) {
    if (r == rank_) {
      peers_.push_back(nullptr);
      continue;
    }
    auto s = std::make_unique<zmq::socket_t>(*rendezvous_.context, zmq::socket_type::push);
    s->set(zmq::sockopt::sndhwm, 0);    // never drop nor block: the sender's memory is the queue
    s->set(zmq::sockopt::linger, 2000);  // a last Shutdown still leaves when we exit
    s->connect(rendezvous_.endpoints[static_cast<std::size_t>(r)]);
    peers_.push_back(std::move(s));
  }
}

ProcessLinks::~ProcessLinks() {
  stop();
  for (auto& s : peers_)
    if (s) s->close();
  rendezvous_.data.close();
}

void ProcessLinks::start() { receiver_ = std::thread([this] { receive_loop(); }); }

void ProcessLinks::stop() {
  stopping_.store(true);
  if (receiver_.joinable()) receiver_.join();
}

void ProcessLinks::send(std::int32_t rank, const std::string& message) {
  if (auto& s = peers_[static_cast<std::size_t>(rank)]) s->send(zmq::buffer(message), zmq::send_flags::none);
}

void ProcessLinks::forget(std::int32_t rank) {
  auto& s = peers_[static_cast<std::size_t>(rank)];
  if (!s) return;
  s->set(zmq::sockopt::linger, 0);
  s->close();
  s.reset();
}

void ProcessLinks::receive_loop() {
  zmq::socket_t& data = rendezvous_.data;
  zmq::pollitem_t item{data.handle(), 0, ZMQ_POLLIN, 0};
  while (!stopping_.load()) {
    // A short poll so that stop() is noticed; messages are taken as soon as they arrive.
    if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) == 0) continue;
    zmq::message_t msg;
    while (data.recv(msg, zmq::recv_flags::dontwait)) {
      ByteReader r(msg.data(), msg.size());
      std::uint8_t type = 0;
      const Handler* handler = r.get(type).ok() ? &handlers_[type] : nullptr;
      if (!handler || !*handler) {
        std::fprintf(stderr, "switchyard: rank %d: dropped a message of unknown type %u\n", rank_, type);
        continue;
      }
      (*handler)(r);
    }
  }
}

}  // namespace sy::dist
