#include "engine/dist/process_links.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "engine/dist/control_messages.h"

namespace {

constexpr std::int64_t kHeartbeatNs = 100'000'000;

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

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
    connect_securely(*s, rendezvous_.keys.get());
    s->connect(rendezvous_.endpoints[static_cast<std::size_t>(r)]);
    peers_.push_back(std::move(s));
  }
}

ProcessLinks::~ProcessLinks() {
  stop();
  for (auto& s : peers_)
    if (s) s->close();
  for (Watched& w : watched_) w.socket->close();
  rendezvous_.data.close();
}

void ProcessLinks::watch(std::vector<std::int32_t> ranks, std::int64_t timeout_ns, std::int64_t startup_ns, Lost lost,
                         std::function<std::int64_t()> clock, std::uint32_t run) {
  clock_ = std::move(clock);
  run_ = run;
  {
    std::lock_guard lock(offsets_mutex_);
    offsets_.clear();  // a new loop: a new time base
  }
  // Watched again for the next deployment on these links: fresh from the next start().
  for (Watched& w : watched_) w.socket->close();
  watched_.clear();
  for (std::int32_t r : ranks) {
    Watched w;
    w.rank = r;
    w.socket = std::make_unique<zmq::socket_t>(*rendezvous_.context, zmq::socket_type::push);
    w.socket->set(zmq::sockopt::linger, 0);
    w.socket->set(zmq::sockopt::sndhwm, 16);  // a dead peer's beats are dropped, not hoarded
    connect_securely(*w.socket, rendezvous_.keys.get());
    w.socket->connect(rendezvous_.endpoints[static_cast<std::size_t>(r)]);
    watched_.push_back(std::move(w));
  }
  timeout_ns_ = timeout_ns;
  startup_ns_ = startup_ns;
  lost_ = std::move(lost);
}

void ProcessLinks::start() {
  stopping_.store(false);
  started_ns_ = next_beat_ns_ = steady_ns();
  receiver_ = std::thread([this] { receive_loop(); });
}

bool ProcessLinks::clock_offset(std::int32_t rank, Offset& out) const {
  std::lock_guard lock(offsets_mutex_);
  for (const auto& [r, o] : offsets_)
    if (r == rank) {
      out = o;
      return true;
    }
  return false;
}

void ProcessLinks::beat_and_check(std::int64_t now, bool check) {
  if (now >= next_beat_ns_) {
    for (Watched& p : watched_) {
      if (p.lost) continue;
      // NTP's four times: the peer's last send time and our receipt of it travel back with our
      // send time; the peer reads the fourth on arrival.
      const std::string beat = encode(Heartbeat{rank_, run_, clock_(), p.their_send, p.our_receipt});
      (void)p.socket->send(zmq::buffer(beat), zmq::send_flags::dontwait);
    }
    next_beat_ns_ = now + kHeartbeatNs;
  }
  if (!check) return;
  for (Watched& p : watched_) {
    if (p.lost) continue;
    const std::int64_t silent = now - (p.last_heard < 0 ? started_ns_ : p.last_heard);
    if (silent <= (p.last_heard < 0 ? startup_ns_ : timeout_ns_)) continue;
    p.lost = true;
    if (lost_) lost_(p.rank, static_cast<double>(silent) / 1e6);
  }
}

void ProcessLinks::stop() {
  stopping_.store(true);
  if (receiver_.joinable()) receiver_.join();
}

void ProcessLinks::send(std::int32_t rank, const std::string& message) {
  if (auto& s = peers_[static_cast<std::size_t>(rank)]) s->send(zmq::buffer(message), zmq::send_flags::none);
}

void ProcessLinks::departed(std::int32_t rank) {
  for (Watched& p : watched_)
    if (p.rank == rank) p.lost = true;  // without lost_: nothing failed
}

void ProcessLinks::forget(std::int32_t rank) {
  auto& s = peers_[static_cast<std::size_t>(rank)];
  if (!s) return;
  s->set(zmq::sockopt::linger, 0);
  s->close();
  s.reset();
}

void ProcessLinks::heard(ByteReader& r) {
  const std::int64_t t4 = clock_ ? clock_() : 0;
  std::uint8_t type = 0;
  Heartbeat beat;
  if (!r.get(type).ok() || !decode(r, beat).ok()) return;
  // A late beat of the previous run (it waited in the socket while no receiver ran): it says
  // nothing of whether the peer has started this one, and its times are of another loop's clock.
  if (beat.run != run_) return;
  // t1, t2: our earlier send and its arrival there; t3: their send (their clock).
  const std::int64_t t1 = beat.echoed_sent, t2 = beat.echoed_arrival, t3 = beat.sent;
  for (Watched& p : watched_) {
    if (p.rank != beat.rank) continue;
    p.last_heard = steady_ns();
    p.their_send = t3;
    p.our_receipt = t4;
    // No sample before the peer has heard us, nor from times that cannot be (an echo of a send
    // still to come, a round trip shorter than the peer's own turnaround): NTP drops those too.
    if (t1 < 0 || t1 > t4 || t2 > t3) return;
    const std::int64_t delay = (t4 - t1) - (t3 - t2);
    if (delay < 0) return;
    const Offset sample{((t2 - t1) + (t3 - t4)) / 2, delay / 2};
    std::lock_guard lock(offsets_mutex_);
    for (auto& [rank, best] : offsets_)
      if (rank == beat.rank) {
        if (sample.error_ns < best.error_ns) best = sample;
        return;
      }
    offsets_.emplace_back(beat.rank, sample);
    return;
  }
}

bool ProcessLinks::next(zmq::message_t& msg) {
  if (kept_.empty()) return rendezvous_.data.recv(msg, zmq::recv_flags::dontwait).has_value();
  msg = std::move(kept_.front());
  kept_.pop_front();
  return true;
}

void ProcessLinks::pump() {
  zmq::message_t msg;
  while (rendezvous_.data.recv(msg, zmq::recv_flags::dontwait)) {
    const auto* bytes = static_cast<const std::uint8_t*>(msg.data());
    if (msg.size() == kHeartbeatBytes && bytes[0] == static_cast<std::uint8_t>(MessageType::Heartbeat)) {
      ByteReader r(msg.data(), msg.size());
      heard(r);
    } else if (msg.size() > 0 && urgent_[bytes[0]] && handlers_[bytes[0]]) {
      ByteReader r(msg.data(), msg.size());
      std::uint8_t type = 0;
      (void)r.get(type);
      handlers_[type](r);
    } else {
      kept_.push_back(std::move(msg));
    }
  }
  // The socket was just drained, so a silent rank's beats are not queued behind anything.
  if (!watched_.empty()) beat_and_check(steady_ns());
}

void ProcessLinks::receive_loop() {
  zmq::socket_t& data = rendezvous_.data;
  zmq::pollitem_t item{data.handle(), 0, ZMQ_POLLIN, 0};
  while (!stopping_.load()) {
    // A short poll so that stop() and the heartbeats' times are noticed; messages are taken as
    // soon as they arrive (at once when a pump() kept some).
    const int ready = zmq::poll(&item, 1, std::chrono::milliseconds(kept_.empty() ? 20 : 0));
    if (!watched_.empty()) beat_and_check(steady_ns(), /*check=*/kept_.empty());
    if (ready == 0 && kept_.empty()) continue;
    zmq::message_t msg;
    while (next(msg)) {
      ByteReader r(msg.data(), msg.size());
      std::uint8_t type = 0;
      if (msg.size() == kHeartbeatBytes && static_cast<const std::uint8_t*>(msg.data())[0] ==
                                                  static_cast<std::uint8_t>(MessageType::Heartbeat)) {
        heard(r);
        continue;
      }
      const Handler* handler = r.get(type).ok() ? &handlers_[type] : nullptr;
      if (!handler || !*handler) {
        std::fprintf(stderr, "switchyard: rank %d: dropped a message of unknown type %u\n", rank_, type);
        continue;
      }
      (*handler)(r);
      // A backlog (on the cuda backend every payload's rows are copied to the GPU here) must
      // not silence this rank: its peers would declare it dead after their timeout.
      if (!watched_.empty()) beat_and_check(steady_ns(), /*check=*/false);
    }
  }
}

}  // namespace sy::dist
