// What one wait on a device link between ranks (an NCCL communicator's join or transfer) does
// next, from what the waiting thread can observe: whether the operation finished, NCCL's
// asynchronous error, what the heartbeats (ProcessLinks) say of the peer, and the time. Pure,
// so that every fault's outcome is tested without a GPU; NcclPeerLinks makes the NCCL calls.
#pragma once

#include <cstdint>
#include <string>

namespace sy::dist {

// What this rank knows of a linked peer apart from NCCL (set from the network thread).
enum class PeerState : std::uint8_t {
  Alive,    // nothing heard against it
  Lost,     // its heartbeats stopped (ProcessLinks): it died or its node is unreachable
  Refused,  // it refused a payload of ours whose rows take the link (LinkRefused message)
};

class LinkWait {
 public:
  // Done: finished. PeerLost: the peer is dead; the operation is abandoned (its rows are lost)
  // and the run takes the lost-rank path. Fail: give up on the link with why(): a join
  // returns it as an error; a transfer ends this rank (its peers then find it dead).
  enum class Next { Poll, Done, PeerLost, Fail };
  struct Step {
    Next next = Next::Poll;
    // ncclCommAbort the link now (at most once per wait): NCCL requires it after an async
    // error, and it releases a transfer whose peer will never complete its half.
    bool abort = false;
  };

  // `what` names the operation and the peer for messages ("NCCL rows to rank 2");
  // `deadline_ns`: the longest the operation may take while the peer still looks alive (the
  // bootstrap timeout); `grace_ns`: after NCCL reported an error, how long to wait for the
  // heartbeats to say whether the peer died (a dead peer is then not this rank's failure).
  // `watched`: whether heartbeats run (not yet while the links join, right after the bootstrap).
  LinkWait(std::string what, std::int64_t deadline_ns, std::int64_t grace_ns, bool watched = true)
      : what_(std::move(what)), deadline_ns_(deadline_ns), grace_ns_(grace_ns), watched_(watched) {}

  // One observation, `elapsed_ns` after the wait began. `done`: the operation completed (its
  // stream is idle, or the join finished). `nccl_error`: empty, or NCCL's asynchronous error
  // (neither ncclSuccess nor ncclInProgress). `refusal`: the peer's reason, with Refused.
  Step observe(std::int64_t elapsed_ns, bool done, const std::string& nccl_error, PeerState peer,
               const std::string& refusal = "");

  // Why the wait ended in Fail or PeerLost.
  const std::string& why() const { return why_; }
  bool aborted() const { return aborted_; }

 private:
  Step finish(Next next, std::string why);

  std::string what_;
  std::int64_t deadline_ns_;
  std::int64_t grace_ns_;
  bool watched_;
  std::int64_t failed_at_ns_ = -1;  // when NCCL first reported an error
  std::string nccl_error_;
  bool aborted_ = false;
  std::string why_;
};

}  // namespace sy::dist
