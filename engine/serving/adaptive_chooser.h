// The `adaptive` policy's decision as a pure object: from the load observed in each window,
// which of sync, pingpong and async should serve now, with hysteresis so that a load near a
// boundary does not flip the policy back and forth. Tested on synthetic observations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/runtime/runtime_policy.h"

namespace sy {

// The load measure is the offered decode work: output tokens/s that arriving requests ask for
// (arrivals × their max_new_tokens), per attention rank. It does not depend on the policy in
// force, unlike queue depths or latencies (a slower policy holds more requests at the same
// load), so the choice does not feed back on itself.
struct AdaptiveThresholds {
  // At or above this load pingpong replaces sync; at or above async_from async replaces
  // either. pingpong_from >= async_from leaves pingpong out.
  double pingpong_from = 0;
  double async_from = 0;
  double hysteresis = 0.15;          // a switch needs the load this fraction past its boundary
  std::int32_t confirm_windows = 2;  // and the same new choice this many windows in a row
  double smoothing = 0.5;            // weight of the newest window in the load's moving average
};

struct AdaptiveObservation {
  std::int64_t t_ns = 0;
  double offered_tokens_per_s_per_rank = 0;  // in the window just ended
};

struct AdaptiveDecision {
  PolicyKind from = PolicyKind::Sync;
  PolicyKind to = PolicyKind::Sync;
  double load = 0;       // the smoothed load that decided it
  std::string reason;    // e.g. "offered 5210 tok/s per rank >= 4600 (async from 4000 + 15 %) for 2 windows"
};

class AdaptiveChooser {
 public:
  AdaptiveChooser(AdaptiveThresholds thresholds, PolicyKind current);

  // One window's observation; a decision when the policy should switch now.
  std::optional<AdaptiveDecision> observe(const AdaptiveObservation& o);
  // The switch was applied (or the operator chose `kind`): the chooser's current policy.
  void set_current(PolicyKind kind);
  PolicyKind current() const { return current_; }
  double load() const { return load_; }
  // The policy for a load, without hysteresis.
  PolicyKind band(double load) const;
  const AdaptiveThresholds& thresholds() const { return t_; }

 private:
  // The policy this load moves to from current_, with hysteresis (current_ when it stays).
  PolicyKind target(double load, std::string& why) const;

  AdaptiveThresholds t_;
  PolicyKind current_;
  bool seen_ = false;
  double load_ = 0;
  PolicyKind pending_ = PolicyKind::Sync;
  std::int32_t pending_windows_ = 0;
};

}  // namespace sy
