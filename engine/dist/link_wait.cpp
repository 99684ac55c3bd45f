#include "engine/dist/link_wait.h"

#include <cstdio>

namespace sy::dist {

LinkWait::Step LinkWait::finish(Next next, std::string why) {
  why_ = std::move(why);
  Step s{next, !aborted_ && next != Next::Done};
  aborted_ = aborted_ || s.abort;
  return s;
}

LinkWait::Step LinkWait::observe(std::int64_t elapsed_ns, bool done, const std::string& nccl_error, PeerState peer,
                                 const std::string& refusal) {
  // Finished rows are delivered even if the peer died just after sending them.
  if (done && nccl_error.empty() && !aborted_) return finish(Next::Done, "");
  // A dead peer is the run's fault path (rank 0 fails its requests), not this rank's failure,
  // whatever NCCL said meanwhile.
  if (peer == PeerState::Lost) return finish(Next::PeerLost, what_ + ": the other rank was found dead");
  if (peer == PeerState::Refused)
    return finish(Next::Fail, what_ + ": the other rank refused a payload whose rows take this link (" + refusal +
                                  "); the link cannot be brought back in step");
  if (!nccl_error.empty() && failed_at_ns_ < 0) {
    failed_at_ns_ = elapsed_ns;
    nccl_error_ = nccl_error;
    // Abort at once (NCCL's rule after an async error), then wait for the heartbeats' verdict.
    aborted_ = true;
    return Step{Next::Poll, true};
  }
  if (failed_at_ns_ >= 0 && elapsed_ns - failed_at_ns_ > grace_ns_) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.0f", static_cast<double>(grace_ns_) / 1e6);
    return finish(Next::Fail, what_ + ": " + nccl_error_ +
                                  (watched_ ? ", and the other rank still answered heartbeats " + std::string(ms) + " ms later"
                                            : std::string()));
  }
  if (elapsed_ns > deadline_ns_) {
    char s[32];
    std::snprintf(s, sizeof s, "%.3g", static_cast<double>(deadline_ns_) / 1e9);
    return finish(Next::Fail, what_ + ": not finished within " + s + " s (the bootstrap timeout)" +
                                  (watched_ ? " while the other rank still answered heartbeats"
                                            : "; did the other rank die or fail before joining?"));
  }
  return Step{};
}

}  // namespace sy::dist
