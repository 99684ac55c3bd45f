// The channels between the processes of one deployment after the bootstrap: this rank's data
// socket, read by a receiver thread, and a socket to every other rank. Messages from one rank
// to another arrive in the order they were sent (one TCP connection per pair), whatever their
// type, which is what lets a control message order itself among shipments. The receiver thread
// also keeps the heartbeats, on sockets of its own, so that a busy event loop does not look dead.
#pragma once

#include <array>
#include <atomic>
#include <mutex>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "engine/dist/bootstrap.h"
#include "engine/dist/wire_format.h"

namespace sy::dist {

class ProcessLinks {
 public:
  // Runs on the receiver thread with a message's body (after its type byte); it posts what it
  // decodes onto an event loop.
  using Handler = std::function<void(ByteReader& body)>;

  ProcessLinks(Rendezvous rendezvous, std::int32_t rank);
  ~ProcessLinks();
  ProcessLinks(const ProcessLinks&) = delete;
  ProcessLinks& operator=(const ProcessLinks&) = delete;

  std::int32_t rank() const { return rank_; }
  std::int32_t world() const { return static_cast<std::int32_t>(peers_.size()); }

  // Before start(). An `urgent` handler also runs amid pump() (it must only set state that
  // another thread polls, never post work that depends on the order of messages).
  void on(MessageType type, Handler handler, bool urgent = false) {
    handlers_[static_cast<std::size_t>(type)] = std::move(handler);
    urgent_[static_cast<std::size_t>(type)] = urgent;
  }
  // Called on the receiver thread, once, when a watched rank falls silent.
  using Lost = std::function<void(std::int32_t rank, double silent_ms)>;
  // Before start(): exchange heartbeats (every 100 ms) with `ranks`; one silent for `timeout_ns`
  // after its first heartbeat, or that never sent one within `startup_ns`, is lost. Heartbeats
  // carry `clock`'s times (the event loop's, readable from any thread) NTP-style, so each side
  // learns the other's clock offset. `run` numbers the deployments served on these links (every
  // rank counts them alike): a heartbeat of another run is ignored, so that the beats a peer
  // sent before the previous run ended, still queued, do not count as its first one of this
  // run (its silence would be timed from them while it still builds the next deployment).
  void watch(std::vector<std::int32_t> ranks, std::int64_t timeout_ns, std::int64_t startup_ns, Lost lost,
             std::function<std::int64_t()> clock, std::uint32_t run = 0);
  // From a handler on the receiver thread: `rank` ended the run on purpose (its Shutdown came),
  // so its silence from now on is not a loss. The handler's work reaches the loop later, under
  // load later than the heartbeat timeout.
  void departed(std::int32_t rank);
  // A watched rank's clock minus ours (its time = ours + offset), from the heartbeat with the
  // shortest round trip so far; error_ns bounds the residual (half that round trip). False until
  // a round trip has completed.
  struct Offset {
    std::int64_t offset_ns = 0;
    std::int64_t error_ns = 0;
  };
  bool clock_offset(std::int32_t rank, Offset& out) const;
  void start();
  // From one thread at a time (the event loop's): queues the message to `rank`; never blocks.
  void send(std::int32_t rank, const std::string& message);
  // Stops the receiver thread (pending outgoing messages are still flushed on destruction).
  // The links may start again, with handlers for the next deployment (a command that serves
  // several runs one after another).
  void stop();
  // From a handler on the receiver thread that waits (an NCCL receive): keeps this rank's
  // heartbeats going, takes in the others' (and urgent messages), and declares silent ranks
  // lost, so that a long wait neither silences this rank nor hides a dead peer. Other messages
  // are kept, in order, for the receiver loop after the handler returns.
  void pump();
  // A rank that died: messages to it are dropped from now on, and none waits for it at exit.
  void forget(std::int32_t rank);
  // Whether forget(rank) was called (the loop's thread, as send and forget are).
  bool forgotten(std::int32_t rank) const { return rank != rank_ && !peers_[static_cast<std::size_t>(rank)]; }

 private:
  void receive_loop();
  // Sends this rank's heartbeats when due; with `check`, also declares silent ranks lost (only
  // between drains of the socket, never amid a backlog: their beats may be queued behind it).
  void beat_and_check(std::int64_t now, bool check = true);
  // A heartbeat arrived (receiver thread): liveness and a clock-offset sample.
  void heard(ByteReader& r);
  // The next message: one pump() kept, else one from the socket (without waiting).
  bool next(zmq::message_t& msg);

  std::int32_t rank_;
  Rendezvous rendezvous_;
  std::vector<std::unique_ptr<zmq::socket_t>> peers_;  // [rank]: PUSH to its data socket; null for self
  std::array<Handler, 256> handlers_;
  std::array<bool, 256> urgent_{};
  std::deque<zmq::message_t> kept_;  // pump()'s messages for the receiver loop, in arrival order
  // Heartbeats, receiver thread only after start().
  struct Watched {
    std::int32_t rank = 0;
    std::unique_ptr<zmq::socket_t> socket;  // PUSH to its data socket, this thread's own
    std::int64_t last_heard = -1;           // steady ns; -1: never
    bool lost = false;                      // or departed: no longer watched
    std::int64_t their_send = -1;           // their clock, when they sent their last heartbeat
    std::int64_t our_receipt = 0;           // our clock, when it arrived
  };
  std::vector<Watched> watched_;
  std::int64_t timeout_ns_ = 0;
  std::int64_t startup_ns_ = 0;
  std::int64_t started_ns_ = 0;
  std::int64_t next_beat_ns_ = 0;
  std::uint32_t run_ = 0;
  Lost lost_;
  std::function<std::int64_t()> clock_;
  mutable std::mutex offsets_mutex_;
  std::vector<std::pair<std::int32_t, Offset>> offsets_;  // [rank, best offset], under offsets_mutex_
  std::atomic<bool> stopping_{false};
  std::thread receiver_;
};

}  // namespace sy::dist
