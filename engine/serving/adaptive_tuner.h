// The `adaptive` policy's online tuner as a pure object: once the load holds, and when the
// decode batch has since moved materially, it serves one window under each candidate policy,
// measures what each served, and keeps the best (remembered for that batch), so the order of
// the policies over load is whatever the cluster shows, not a band order fixed in advance.
// Tested on synthetic observations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/runtime_policy.h"

namespace sy {

struct AdaptiveTuning {
  std::vector<PolicyKind> candidates;  // probed in this order; empty: sync, pingpong, async
  // Windows served under the starting policy before the first probe: an empty system filling
  // up is not the load that the policies should be compared at.
  std::int32_t warmup_windows = 5;
  // The load that orders the policies is the decode batch: requests running per attention
  // rank (sync's iteration costs about the same for 2 rows as for 20, async's grows with them),
  // averaged over the last load_windows windows. It follows arrivals, a run's start and its
  // drain alike. A new probe needs it this fraction and at least min_running_change requests
  // away from where the last probe decided, for confirm_windows windows in a row (hysteresis).
  std::int32_t load_windows = 10;
  double reprobe_change = 0.3;
  // A clear win needs a larger move to be overturned, and a re-probe serves windows under the
  // policies that lost: where the runner-up was w behind (ITL, or tokens/s where one fell
  // behind), the move that re-probes is reprobe_change * w / clear_win when that is more, at
  // most max_reprobe_change. (Our reading of weighing a probe's cost against the gain it could
  // find; the demo's load wanders 16-24 requests per rank and sync wins there by 23 %.)
  double clear_win = 0.1;
  double max_reprobe_change = 0.8;
  double min_running_change = 1.0;
  std::int32_t confirm_windows = 3;
  // A probe (or a switch to a remembered choice) waits for a steady load: over the last
  // steady_windows windows the requests running, and those waiting, per attention rank spread
  // at most steady_spread of their mean (or min_running_change requests, whichever is more),
  // and arrivals have not stopped: none for as long as drain_arrivals of them were due at the
  // recent rate. A load still ramping (a run's first seconds; a queue growing behind a full
  // batch) or draining is not the load the choice will serve, and a probe there serves its
  // slower windows for nothing: on the README's example every such probe kept sync and cost 2 %
  // of its throughput. (A false drain alarm only delays a probe a window; with 3 due, the
  // sweep's 12 and 24 req/s runs probed after their arrivals had ended.)
  std::int32_t steady_windows = 5;
  double steady_spread = 0.15;
  double drain_arrivals = 1;
  // A challenger replaces the policy in force before the probe only when its ITL is this
  // fraction lower (hysteresis on the choice: the switch back costs a drain).
  double margin = 0.03;
  // A window whose requests waited longer than this many of its inter-token gaps to be admitted
  // fell behind the load (one that keeps up admits at the next iteration); where one did, the
  // policies compare by tokens/s served, not by ITL.
  double max_queue_itls = 3;
  std::int64_t min_itl_samples = 20;  // fewer inter-token gaps: the window measures nothing
  // A probe's windows under the candidates last this long (the coordinator's other windows
  // 100 ms): half as long serves half as much under the slower policies, and on the demo's
  // load still gives each candidate hundreds of inter-token gaps (30 ms gave async too few).
  // Gaps are counted only where both tokens fall in the window, which favours short gaps the
  // more the shorter the window: it narrows the policies' differences, never reverses them.
  // One with fewer than min_itl_samples gaps runs on to 100 ms (the coordinator's window).
  std::int64_t probe_window_ns = 50'000'000;
};

// One window, served wholly under `policy` (the coordinator starts a new window whenever a
// switch is applied, so the drain of a switch falls in no window).
struct TunerObservation {
  std::int64_t t_ns = 0;
  double window_s = 0;
  PolicyKind policy = PolicyKind::Sync;
  double offered_tokens_per_s_per_rank = 0;  // max_new_tokens of the arrivals, per s and attention rank
  std::int64_t arrivals = 0;
  double running_per_rank = 0;  // requests running per attention rank at the window's end
  double waiting_per_rank = 0;  // requests waiting for admission per attention rank at its end
  // Mean wait of the requests admitted in the window, or the wait so far of the oldest still
  // waiting at its end, whichever is longer.
  double queue_delay_ms = 0;
  double served_tokens_per_s = 0;
  double itl_ms = 0;  // mean gap between two tokens of a request, both sampled under `policy`
  std::int64_t itl_samples = 0;
  // The drain of the switch that put `policy` in force just before this window (0: none): from
  // the decision to the safe point, time in which the deployment finished what was in flight
  // and admitted nothing. A probe's cost, reported with its choice.
  double drain_ms = 0;
};

struct TunerDecision {
  PolicyKind from = PolicyKind::Sync;
  PolicyKind to = PolicyKind::Sync;  // == from: the probe kept the policy it ended on
  double load = 0;
  bool probing = false;  // a switch to measure a candidate, not the choice
  std::string reason;
};

// What a probe chose at a batch: the same batch later switches to it without probing again.
struct Probed {
  double running = 0;
  PolicyKind chose = PolicyKind::Sync;
  double t_s = 0;
  double band = 0;  // the relative move of the batch that probes again
};

class AdaptiveTuner {
 public:
  AdaptiveTuner(AdaptiveTuning tuning, PolicyKind current);

  // One window; a decision when the policy should switch (or a probe ended).
  std::optional<TunerDecision> observe(const TunerObservation& o);
  // The operator chose `kind`: it is in force, and any probe under way is abandoned.
  void set_current(PolicyKind kind);
  PolicyKind current() const { return current_; }
  double load() const { return load_; }  // offered tok/s per attention rank, recent windows
  double running() const { return running_; }
  bool probing() const { return probing_; }
  const std::vector<Probed>& probed() const { return probed_; }
  const AdaptiveTuning& tuning() const { return t_; }

 private:
  struct Measured {
    PolicyKind kind;
    TunerObservation o;
  };
  std::optional<TunerDecision> next_probe_step(double load);
  TunerDecision finish_probe();
  // Whether a serves the load better than b: lower ITL when both kept up, else more tokens/s.
  bool better(const TunerObservation& a, const TunerObservation& b) const;
  bool fell_behind(const TunerObservation& o) const;

  AdaptiveTuning t_;
  PolicyKind current_;
  std::int64_t windows_ = 0;
  std::int64_t t_ns_ = 0;  // the last window's end
  struct Window {
    double offered_tokens_per_rank, seconds, running_per_rank;
    std::int64_t arrivals;
    double waiting_per_rank;
  };
  bool steady() const;
  // A choice already measured near `running` (within the re-probe change), if any.
  const Probed* remembered(double running) const;

  std::vector<Window> recent_;  // the last max(load_windows, steady_windows) windows, oldest first
  double load_ = 0;
  double running_ = 0;  // mean of recent_'s running_per_rank
  std::optional<double> probed_running_;  // the batch the last decision was taken at
  double band_ = 0;                       // and the relative move that probes again
  std::vector<Probed> probed_;            // every probe's batch and choice, in order
  std::int32_t moved_windows_ = 0;
  bool probing_ = false;
  PolicyKind incumbent_ = PolicyKind::Sync;  // in force when the probe began
  std::vector<PolicyKind> to_probe_;         // candidates not yet measured, next first
  std::vector<Measured> measured_;
  double probe_drain_ms_ = 0;  // the drains of the probe's switches so far
};

}  // namespace sy
