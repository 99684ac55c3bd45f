#include "engine/serving/adaptive_tuner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sy {
namespace {

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

AdaptiveTuner::AdaptiveTuner(AdaptiveTuning tuning, PolicyKind current) : t_(std::move(tuning)), current_(current) {
  if (t_.candidates.empty())
    for (PolicyKind k : {PolicyKind::Sync, PolicyKind::PingPong, PolicyKind::Async}) t_.candidates.push_back(k);
}

void AdaptiveTuner::set_current(PolicyKind kind) {
  current_ = kind;
  probing_ = false;
  to_probe_.clear();
  measured_.clear();
  moved_windows_ = 0;
}

bool AdaptiveTuner::fell_behind(const TunerObservation& o) const {
  return o.itl_samples > 0 && o.queue_delay_ms > t_.max_queue_itls * o.itl_ms;
}

bool AdaptiveTuner::better(const TunerObservation& a, const TunerObservation& b) const {
  const bool a_measured = a.itl_samples >= t_.min_itl_samples, b_measured = b.itl_samples >= t_.min_itl_samples;
  if (a_measured != b_measured) return a_measured;
  // Either behind the load: the tokens/s each served is what decides (the one behind served
  // its capacity, one that kept up the load and the backlog it found). Both keeping up: they
  // serve the same tokens, and the one that serves them sooner is better (and drains a
  // finite run sooner).
  if (fell_behind(a) || fell_behind(b)) return a.served_tokens_per_s > b.served_tokens_per_s;
  return a.itl_ms < b.itl_ms;
}

std::optional<TunerDecision> AdaptiveTuner::observe(const TunerObservation& o) {
  ++windows_;
  recent_.push_back({o.offered_tokens_per_s_per_rank * o.window_s, o.window_s, o.running_per_rank});
  if (static_cast<std::int32_t>(recent_.size()) > std::max(1, t_.load_windows)) recent_.erase(recent_.begin());
  double tokens = 0, seconds = 0, running = 0;
  for (const Window& w : recent_) tokens += w.offered_tokens_per_rank, seconds += w.seconds, running += w.running_per_rank;
  load_ = seconds > 0 ? tokens / seconds : 0;
  running_ = running / static_cast<double>(recent_.size());
  if (probing_) {
    // The coordinator observes only whole windows under one policy; one under another policy
    // (an operator's switch raced the probe) measures nothing the probe asked for.
    if (to_probe_.empty() || o.policy != to_probe_.front()) return std::nullopt;
    measured_.push_back({o.policy, o});
    probe_drain_ms_ += o.drain_ms;
    to_probe_.erase(to_probe_.begin());
    if (to_probe_.empty()) return finish_probe();
    TunerDecision d;
    d.from = current_;
    d.to = current_ = to_probe_.front();
    d.load = load_;
    d.probing = true;
    d.reason = "probe: measuring " + policy_name(d.to) + " after " + policy_name(d.from);
    return d;
  }
  if (o.policy != current_ || o.itl_samples < t_.min_itl_samples) return std::nullopt;  // too little to compare
  std::string why;
  if (!probed_running_) {
    if (windows_ <= t_.warmup_windows) return std::nullopt;
    why = "first probe, " + fixed(running_, 1) + " requests running per attention rank";
  } else {
    const double change = std::abs(running_ - *probed_running_);
    moved_windows_ = change > std::max(t_.reprobe_change * *probed_running_, t_.min_running_change) ? moved_windows_ + 1 : 0;
    if (moved_windows_ < t_.confirm_windows) return std::nullopt;
    why = fixed(running_, 1) + " requests running per attention rank against " + fixed(*probed_running_, 1) +
          " at the last probe, for " + std::to_string(moved_windows_) + " windows";
  }
  // The window just served under the policy in force is its measurement.
  to_probe_.clear();
  for (PolicyKind k : t_.candidates)
    if (k != current_) to_probe_.push_back(k);
  if (to_probe_.empty()) return std::nullopt;
  probing_ = true;
  incumbent_ = current_;
  measured_.assign(1, {current_, o});
  probe_drain_ms_ = 0;
  moved_windows_ = 0;
  TunerDecision d;
  d.from = current_;
  d.to = current_ = to_probe_.front();
  d.load = load_;
  d.probing = true;
  d.reason = "probe (" + why + "): measuring " + policy_name(d.to) + " after " + policy_name(d.from);
  return d;
}

TunerDecision AdaptiveTuner::finish_probe() {
  const Measured* best = &measured_.front();  // the incumbent
  for (const Measured& m : measured_)
    if (better(m.o, best->o)) best = &m;
  const Measured& incumbent = measured_.front();
  // Leaving the incumbent costs two drains (to the probe's last candidate and back is already
  // paid; a later probe may switch again), so a challenger that only keeps up as well must be
  // clearly faster.
  if (best != &incumbent && !fell_behind(best->o) && !fell_behind(incumbent.o) &&
      incumbent.o.itl_samples >= t_.min_itl_samples && best->o.itl_ms > incumbent.o.itl_ms * (1 - t_.margin))
    best = &incumbent;
  TunerDecision d;
  d.from = current_;
  d.to = best->kind;
  d.load = load_;
  d.reason = "probed at " + fixed(running_, 1) + " requests running and " + fixed(load_, 0) + " tok/s offered per attention rank:";
  for (const Measured& m : measured_) {
    d.reason += " " + policy_name(m.kind) + " " + fixed(m.o.itl_ms, 2) + " ms " + fixed(m.o.served_tokens_per_s, 0) + " tok/s";
    if (fell_behind(m.o)) d.reason += " (fell behind)";
    if (m.o.itl_samples < t_.min_itl_samples) d.reason += " (too few tokens)";
    d.reason += &m == &measured_.back() ? ";" : ",";
  }
  d.reason += " keeps " + policy_name(d.to);
  if (d.to == incumbent_ && best == &incumbent && measured_.size() > 1) d.reason += " (in force before the probe)";
  d.reason += "; the probe's switches drained " + fixed(probe_drain_ms_, 1) + " ms";
  current_ = d.to;
  probing_ = false;
  to_probe_.clear();
  measured_.clear();
  probed_running_ = running_;
  moved_windows_ = 0;
  return d;
}

}  // namespace sy
