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
  // The drain of the switch into the window admitted nobody: the wait it added is the
  // switch's, not the policy's.
  return o.itl_samples > 0 && o.queue_delay_ms - o.drain_ms > t_.max_queue_itls * o.itl_ms;
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

bool AdaptiveTuner::steady() const {
  const auto n = static_cast<std::size_t>(std::max(1, t_.steady_windows));
  if (recent_.size() < n) return false;
  // The batch and the queue each: a queue growing behind a batch at its cap is a load still
  // rising, though the batch no longer moves.
  for (double Window::*field : {&Window::running_per_rank, &Window::waiting_per_rank}) {
    double lo = recent_.back().*field, hi = lo, sum = 0;
    for (auto w = recent_.end() - static_cast<std::ptrdiff_t>(n); w != recent_.end(); ++w) {
      lo = std::min(lo, (*w).*field);
      hi = std::max(hi, (*w).*field);
      sum += (*w).*field;
    }
    if (hi - lo > std::max(t_.steady_spread * sum / static_cast<double>(n), t_.min_running_change)) return false;
  }
  // Draining: the arrivals stopped, so the batch can only fall (a queue behind a full batch
  // shrinks slowly enough to look steady). Stopped: no arrival for the time in which the
  // recent windows' rate expects drain_arrivals of them.
  std::int64_t arrivals = 0;
  std::size_t empty = 0;
  for (const Window& w : recent_) {
    arrivals += w.arrivals;
    empty = w.arrivals > 0 ? 0 : empty + 1;
  }
  const double per_window = static_cast<double>(arrivals) / static_cast<double>(recent_.size());
  return arrivals > 0 && static_cast<double>(empty) * per_window < t_.drain_arrivals;
}

const Probed* AdaptiveTuner::remembered(double running) const {
  const Probed* best = nullptr;
  for (const Probed& p : probed_) {
    const double d = std::abs(running - p.running);
    if (d <= std::max(p.band * p.running, t_.min_running_change) && (!best || d <= std::abs(running - best->running)))
      best = &p;
  }
  return best;
}

std::optional<TunerDecision> AdaptiveTuner::observe(const TunerObservation& o) {
  ++windows_;
  t_ns_ = o.t_ns;
  recent_.push_back({o.offered_tokens_per_s_per_rank * o.window_s, o.window_s, o.running_per_rank, o.arrivals, o.waiting_per_rank});
  if (static_cast<std::int32_t>(recent_.size()) > std::max({1, t_.load_windows, t_.steady_windows})) recent_.erase(recent_.begin());
  double tokens = 0, seconds = 0, running = 0;
  const auto m = std::min(recent_.size(), static_cast<std::size_t>(std::max(1, t_.load_windows)));
  for (auto w = recent_.end() - static_cast<std::ptrdiff_t>(m); w != recent_.end(); ++w)
    tokens += w->offered_tokens_per_rank, seconds += w->seconds, running += w->running_per_rank;
  load_ = seconds > 0 ? tokens / seconds : 0;
  running_ = running / static_cast<double>(m);
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
    if (windows_ <= t_.warmup_windows || !steady()) return std::nullopt;
    why = "first probe, " + fixed(running_, 1) + " requests running per attention rank";
  } else {
    const double change = std::abs(running_ - *probed_running_);
    moved_windows_ = change > std::max(band_ * *probed_running_, t_.min_running_change) ? moved_windows_ + 1 : 0;
    if (moved_windows_ < t_.confirm_windows || !steady()) return std::nullopt;
    // A batch measured before: its choice, without serving the slower policies again.
    if (const Probed* p = remembered(running_)) {
      const double was = *probed_running_;
      probed_running_ = running_;
      band_ = p->band;
      moved_windows_ = 0;
      if (p->chose == current_) return std::nullopt;
      TunerDecision d;
      d.from = current_;
      d.to = current_ = p->chose;
      d.load = load_;
      d.reason = fixed(running_, 1) + " requests running per attention rank against " + fixed(was, 1) +
                 " at the last decision: " + policy_name(d.to) + " as the probe at " + fixed(p->t_s, 3) + " s measured at " +
                 fixed(p->running, 1) + " (not probed again)";
      return d;
    }
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
  // How far the runner-up was behind the choice decides how far the batch must move to probe again.
  bool by_tokens = false;
  for (const Measured& m : measured_) by_tokens = by_tokens || fell_behind(m.o);
  double win = -1;
  for (const Measured& m : measured_) {
    if (&m == best || m.o.itl_samples < t_.min_itl_samples) continue;
    const double w = by_tokens ? (m.o.served_tokens_per_s > 0 ? best->o.served_tokens_per_s / m.o.served_tokens_per_s - 1 : 1e9)
                               : (best->o.itl_ms > 0 ? m.o.itl_ms / best->o.itl_ms - 1 : 0);
    win = win < 0 ? w : std::min(win, w);
  }
  band_ = std::clamp(t_.reprobe_change * std::max(1.0, win / t_.clear_win), t_.reprobe_change,
                     std::max(t_.reprobe_change, t_.max_reprobe_change));
  d.reason += "; probes again when the batch moves " + fixed(100 * band_, 0) + " %";
  current_ = d.to;
  probing_ = false;
  to_probe_.clear();
  measured_.clear();
  probed_running_ = running_;
  probed_.push_back({running_, d.to, static_cast<double>(t_ns_) * 1e-9, band_});
  moved_windows_ = 0;
  return d;
}

}  // namespace sy
