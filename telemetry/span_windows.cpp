#include "telemetry/span_windows.h"

#include <algorithm>

namespace sy::telemetry {

std::int64_t window_start(std::int64_t t, std::int64_t window_ns) {
  const std::int64_t q = t / window_ns;
  return (t % window_ns < 0 ? q - 1 : q) * window_ns;
}

std::int64_t SpanWindow::busy_ns() const {
  std::int64_t busy = 0;
  for (std::size_t k = 0; k < kSpanKinds; ++k)
    if (k != static_cast<std::size_t>(SpanKind::Stall)) busy += kind_ns[k];
  return busy;
}

void SpanWindow::merge(const SpanWindow& o) {
  spans += o.spans;
  tokens += o.tokens;
  sampled_tokens += o.sampled_tokens;
  for (std::size_t k = 0; k < kSpanKinds; ++k) kind_ns[k] += o.kind_ns[k];
  for (std::size_t r = 0; r < kStallReasons; ++r) stall_ns[r] += o.stall_ns[r];
  queue_token_ns += o.queue_token_ns;
}

SpanWindowAccumulator::SpanWindowAccumulator(std::int64_t window_ns) : window_ns_(std::max<std::int64_t>(window_ns, 1)) {}

SpanWindow& SpanWindowAccumulator::window(std::int64_t start, std::int32_t device, Lane lane) {
  auto [it, inserted] = open_.try_emplace({start, device, static_cast<int>(lane)});
  if (inserted) {
    it->second.start_ns = start;
    it->second.window_ns = window_ns_;
    it->second.device = device;
    it->second.lane = lane;
  }
  return it->second;
}

void SpanWindowAccumulator::add(const Span& s) {
  if (s.end_ns < s.start_ns || static_cast<std::size_t>(s.kind) >= kSpanKinds) return;
  latest_ns_ = std::max(latest_ns_, s.end_ns);
  const std::int64_t first = window_start(s.start_ns, window_ns_);
  SpanWindow& w = window(first, s.device, s.lane);
  ++w.spans;
  w.tokens += s.tokens;
  if (s.kind == SpanKind::Sampler) w.sampled_tokens += s.tokens;
  const auto kind = static_cast<std::size_t>(s.kind);
  const auto reason = static_cast<std::size_t>(s.stall_reason);
  const bool stall = s.kind == SpanKind::Stall && reason < kStallReasons;
  // A span's time goes to every window it crosses, so that long spans (a transfer over a slow
  // link, a long stall) weigh where they happened.
  for (std::int64_t start = first; start < s.end_ns || start == first; start += window_ns_) {
    const std::int64_t a = std::max(s.start_ns, start), b = std::min(s.end_ns, start + window_ns_);
    if (b <= a) {
      if (start != first) break;
      continue;
    }
    SpanWindow& x = start == first ? w : window(start, s.device, s.lane);
    x.kind_ns[kind] += b - a;
    if (stall) x.stall_ns[reason] += b - a;
  }
}

void SpanWindowAccumulator::integrate_queue(std::int32_t device, std::int64_t t_ns) {
  QueueState& q = queues_[device];
  if (!q.started) {
    q.started = true;
    q.last_t = t_ns;
    return;
  }
  if (t_ns <= q.last_t) return;
  if (q.total != 0) {
    for (std::int64_t start = window_start(q.last_t, window_ns_); start < t_ns; start += window_ns_) {
      const std::int64_t a = std::max(q.last_t, start), b = std::min(t_ns, start + window_ns_);
      if (b > a) window(start, device, Lane::Compute).queue_token_ns += q.total * (b - a);
    }
  }
  q.last_t = t_ns;
}

void SpanWindowAccumulator::add(const QueueSample& sample) {
  latest_ns_ = std::max(latest_ns_, sample.t_ns);
  integrate_queue(sample.device, sample.t_ns);
  QueueState& q = queues_[sample.device];
  std::int64_t& depth = q.depth[{static_cast<int>(sample.layer), sample.block, sample.index}];
  q.total += sample.depth_tokens - depth;
  depth = sample.depth_tokens;
}

void SpanWindowAccumulator::close_before(std::int64_t t_ns, std::vector<SpanWindow>& out) {
  // Queue depth holds between samples: carry each device's integral up to the closing time.
  for (auto& [device, q] : queues_)
    if (q.started && q.last_t < t_ns) integrate_queue(device, t_ns);
  auto it = open_.begin();
  while (it != open_.end() && it->second.end_ns() <= t_ns) {
    out.push_back(it->second);
    it = open_.erase(it);
  }
}

void SpanWindowAccumulator::close_all(std::vector<SpanWindow>& out) {
  // A depth holds until the newest time anything was seen.
  for (auto& [device, q] : queues_)
    if (q.started && q.last_t < latest_ns_) integrate_queue(device, latest_ns_);
  for (auto& [key, w] : open_) out.push_back(w);
  open_.clear();
}

}  // namespace sy::telemetry
