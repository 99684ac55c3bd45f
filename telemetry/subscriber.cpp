#include "telemetry/subscriber.h"

#include <map>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "telemetry/zmq_curve.h"

namespace sy::telemetry {

namespace {

class ZmqSubscriber final : public Subscriber {
 public:
  std::vector<Batch> poll(std::chrono::milliseconds timeout) override {
    std::vector<Batch> out;
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, timeout) == 0) return out;
      // Bounded per call, so that a firehose cannot keep poll() from returning.
      for (int i = 0; i < 100000; ++i) {
        frames_.clear();
        if (!zmq::recv_multipart(socket_, std::back_inserter(frames_), zmq::recv_flags::dontwait)) break;
        last_message_ = std::chrono::steady_clock::now();
        if (frames_.size() != 3) {
          ++decode_errors_;
          continue;
        }
        auto batch = decode(frames_[0].to_string_view(), frames_[1].to_string_view(), frames_[2].to_string_view());
        if (!batch.ok()) {
          ++decode_errors_;
          continue;
        }
        track(*batch);
        out.push_back(std::move(batch).value());
      }
    } catch (const zmq::error_t&) {
      // The context is going away; return what we have.
    }
    return out;
  }

  std::uint64_t lost_messages() const override { return lost_; }
  std::uint64_t decode_errors() const override { return decode_errors_; }
  std::uint64_t run_id() const override { return run_id_; }
  std::chrono::steady_clock::time_point last_message() const override { return last_message_; }

  zmq::context_t context_{1};
  zmq::socket_t socket_;

 private:
  // Sequence numbers count per topic from 0 within a run; a jump is messages lost (the PUB
  // side dropped them at its high-water mark, or the connection was down). A new run id
  // starts every topic afresh.
  void track(const Batch& b) {
    if (b.header.run_id != run_id_) {
      run_id_ = b.header.run_id;
      next_sequence_.clear();
    }
    auto it = next_sequence_.find(b.topic);
    if (it != next_sequence_.end() && b.header.sequence > it->second) lost_ += b.header.sequence - it->second;
    next_sequence_[b.topic] = b.header.sequence + 1;
  }

  std::vector<zmq::message_t> frames_;
  std::map<Topic, std::uint64_t> next_sequence_;
  std::uint64_t lost_ = 0;
  std::uint64_t decode_errors_ = 0;
  std::uint64_t run_id_ = 0;
  std::chrono::steady_clock::time_point last_message_{};
};

}  // namespace

StatusOr<std::unique_ptr<Subscriber>> Subscriber::connect(const std::string& endpoint, const CurveClientKeys* keys) {
  if (Status s = check_client_endpoint("telemetry", endpoint, keys); !s.ok()) return s;
  auto sub = std::make_unique<ZmqSubscriber>();
  try {
    sub->socket_ = zmq::socket_t(sub->context_, zmq::socket_type::sub);
    sub->socket_.set(zmq::sockopt::linger, 0);
    sub->socket_.set(zmq::sockopt::rcvhwm, 10000);
    sub->socket_.set(zmq::sockopt::reconnect_ivl, 200);
    sub->socket_.set(zmq::sockopt::reconnect_ivl_max, 2000);
    if (keys != nullptr) set_curve_client(sub->socket_, *keys);
    sub->socket_.set(zmq::sockopt::subscribe, "");
    sub->socket_.connect(endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Error("cannot connect to telemetry endpoint " + endpoint + ": " + e.what());
  }
  return std::unique_ptr<Subscriber>(std::move(sub));
}

}  // namespace sy::telemetry
