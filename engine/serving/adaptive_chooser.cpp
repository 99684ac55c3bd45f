#include "engine/serving/adaptive_chooser.h"

#include <cstdio>

namespace sy {
namespace {

// 0 sync, 1 pingpong, 2 async: the order of the bands as the load rises.
int level(PolicyKind k) { return k == PolicyKind::Async ? 2 : k == PolicyKind::PingPong ? 1 : 0; }

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

}  // namespace

AdaptiveChooser::AdaptiveChooser(AdaptiveThresholds thresholds, PolicyKind current)
    : t_(thresholds), current_(current), pending_(current) {}

PolicyKind AdaptiveChooser::band(double load) const {
  if (load >= t_.async_from) return PolicyKind::Async;
  if (t_.pingpong_from < t_.async_from && load >= t_.pingpong_from) return PolicyKind::PingPong;
  return PolicyKind::Sync;
}

PolicyKind AdaptiveChooser::target(double load, std::string& why) const {
  const bool with_pingpong = t_.pingpong_from < t_.async_from;
  const double up = 1 + t_.hysteresis, down = 1 - t_.hysteresis;
  const int now = level(current_);
  // Upwards: the highest band whose boundary the load passes by the margin.
  if (now < 2 && load >= t_.async_from * up) {
    why = ">= " + number(t_.async_from * up) + " (async from " + number(t_.async_from) + " + margin)";
    return PolicyKind::Async;
  }
  if (now < 1 && with_pingpong && load >= t_.pingpong_from * up) {
    why = ">= " + number(t_.pingpong_from * up) + " (pingpong from " + number(t_.pingpong_from) + " + margin)";
    return PolicyKind::PingPong;
  }
  // Downwards: below the current band's lower boundary by the margin.
  if (now == 2 && load < t_.async_from * down) {
    why = "< " + number(t_.async_from * down) + " (async from " + number(t_.async_from) + " - margin)";
    return with_pingpong && load >= t_.pingpong_from * down ? PolicyKind::PingPong : PolicyKind::Sync;
  }
  if (now == 1 && (!with_pingpong || load < t_.pingpong_from * down)) {
    why = "< " + number(t_.pingpong_from * down) + " (pingpong from " + number(t_.pingpong_from) + " - margin)";
    return PolicyKind::Sync;
  }
  return current_;
}

std::optional<AdaptiveDecision> AdaptiveChooser::observe(const AdaptiveObservation& o) {
  const double x = o.offered_tokens_per_s_per_rank;
  load_ = seen_ ? t_.smoothing * x + (1 - t_.smoothing) * load_ : x;
  seen_ = true;
  std::string why;
  const PolicyKind want = target(load_, why);
  if (want == current_) {
    pending_windows_ = 0;
    return std::nullopt;
  }
  pending_windows_ = want == pending_ ? pending_windows_ + 1 : 1;
  pending_ = want;
  if (pending_windows_ < t_.confirm_windows) return std::nullopt;
  AdaptiveDecision d;
  d.from = current_;
  d.to = want;
  d.load = load_;
  d.reason = "offered " + number(load_) + " tok/s per attention rank " + why + " for " +
             std::to_string(pending_windows_) + (pending_windows_ == 1 ? " window" : " windows");
  current_ = want;
  pending_windows_ = 0;
  return d;
}

void AdaptiveChooser::set_current(PolicyKind kind) {
  current_ = kind;
  pending_ = kind;
  pending_windows_ = 0;
}

}  // namespace sy
