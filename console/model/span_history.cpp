#include "console/model/span_history.h"

#include <algorithm>
#include <limits>

namespace sy::console {

using telemetry::Lane;
using telemetry::Span;
using telemetry::SpanKind;

std::int64_t WindowTotals::busy_ns() const {
  std::int64_t busy = 0;
  for (std::size_t k = 0; k < kind_ns.size(); ++k)
    if (k != static_cast<std::size_t>(SpanKind::Stall)) busy += kind_ns[k];
  return busy;
}

bool WindowTotals::empty() const {
  if (spans != 0) return false;
  for (auto v : kind_ns)
    if (v != 0) return false;
  return true;
}

void WindowTotals::add(const WindowTotals& o) {
  spans += o.spans;
  tokens += o.tokens;
  sampled_tokens += o.sampled_tokens;
  for (std::size_t k = 0; k < kind_ns.size(); ++k) kind_ns[k] += o.kind_ns[k];
  for (std::size_t r = 0; r < stall_ns.size(); ++r) stall_ns[r] += o.stall_ns[r];
}

WindowTotals totals_of(const telemetry::SpanWindow& w) {
  WindowTotals t;
  t.spans = w.spans;
  t.tokens = w.tokens;
  t.sampled_tokens = w.sampled_tokens;
  t.kind_ns = w.kind_ns;
  t.stall_ns = w.stall_ns;
  return t;
}

std::size_t WindowSeries::index_at(std::int64_t t) const {
  if (windows_.empty() || t < origin_ns_) return 0;
  const auto i = static_cast<std::size_t>((t - origin_ns_) / window_ns_);
  return std::min(i, windows_.size());
}

WindowTotals* WindowSeries::slot(std::int64_t t, std::size_t max_windows) {
  const std::int64_t start = telemetry::window_start(t, window_ns_);
  if (windows_.empty()) {
    origin_ns_ = start;
    windows_.emplace_back();
    return &windows_.back();
  }
  if (start < origin_ns_) {
    const std::int64_t more = (origin_ns_ - start) / window_ns_;
    if (static_cast<std::size_t>(more) + windows_.size() > max_windows) return nullptr;
    windows_.insert(windows_.begin(), static_cast<std::size_t>(more), WindowTotals{});
    origin_ns_ = start;
    return &windows_.front();
  }
  const std::int64_t i = (start - origin_ns_) / window_ns_;
  if (static_cast<std::size_t>(i) >= max_windows) return nullptr;
  if (static_cast<std::size_t>(i) >= windows_.size()) windows_.resize(static_cast<std::size_t>(i) + 1);
  return &windows_[static_cast<std::size_t>(i)];
}

bool WindowSeries::add(const Span& s, std::size_t max_windows) {
  if (s.end_ns < s.start_ns || static_cast<std::size_t>(s.kind) >= telemetry::kSpanKinds) return false;
  WindowTotals* first = slot(s.start_ns, max_windows);
  if (first == nullptr) return false;
  ++first->spans;
  first->tokens += s.tokens;
  if (s.kind == SpanKind::Sampler) first->sampled_tokens += s.tokens;
  const auto kind = static_cast<std::size_t>(s.kind);
  const auto reason = static_cast<std::size_t>(s.stall_reason);
  const bool stall = s.kind == SpanKind::Stall && reason < telemetry::kStallReasons;
  for (std::int64_t start = telemetry::window_start(s.start_ns, window_ns_); start < s.end_ns; start += window_ns_) {
    const std::int64_t a = std::max(s.start_ns, start), b = std::min(s.end_ns, start + window_ns_);
    if (b <= a) continue;
    WindowTotals* w = slot(start, max_windows);
    if (w == nullptr) break;
    w->kind_ns[kind] += b - a;
    if (stall) w->stall_ns[reason] += b - a;
  }
  return true;
}

bool WindowSeries::add(std::int64_t start_ns, const WindowTotals& totals, std::size_t max_windows) {
  WindowTotals* w = slot(start_ns, max_windows);
  if (w == nullptr) return false;
  w->add(totals);
  return true;
}

void WindowSeries::drop_before(std::int64_t t_ns) {
  while (!windows_.empty() && origin_ns_ + window_ns_ <= t_ns) {
    windows_.pop_front();
    origin_ns_ += window_ns_;
  }
}

void WindowSeries::coarsen() {
  const std::int64_t wider = window_ns_ * 2;
  if (!windows_.empty() && telemetry::window_start(origin_ns_, wider) != origin_ns_) {
    windows_.push_front(WindowTotals{});
    origin_ns_ -= window_ns_;
  }
  std::deque<WindowTotals> merged;
  for (std::size_t i = 0; i < windows_.size(); i += 2) {
    WindowTotals t = windows_[i];
    if (i + 1 < windows_.size()) t.add(windows_[i + 1]);
    merged.push_back(t);
  }
  windows_.swap(merged);
  window_ns_ = wider;
}

SpanHistory::Lanes& SpanHistory::lanes(std::int32_t device) {
  if (device >= static_cast<std::int32_t>(devices_.size())) {
    devices_.resize(static_cast<std::size_t>(device) + 1);
    for (auto& l : devices_)
      for (auto& c : l.coarse)
        if (c.window_ns() != coarse_window_ns_ && c.empty()) c = WindowSeries(coarse_window_ns_);
  }
  return devices_[static_cast<std::size_t>(device)];
}

void SpanHistory::coarsen_all() {
  coarse_window_ns_ *= 2;
  for (auto& l : devices_)
    for (auto& c : l.coarse) c.coarsen();
}

void SpanHistory::add(const Span& s, bool coarse) {
  const auto lane = static_cast<std::size_t>(s.lane);
  if (s.device < 0 || lane >= 3) return;
  Lanes& l = lanes(s.device);
  // The fine series lives within the live retention: a span far from it is left out of it.
  l.fine[lane].add(s, 1'000'000);
  if (!coarse) return;
  // The whole run: the series doubles its window when the run outgrows it (never drops).
  for (int attempt = 0; attempt < 40 && !l.coarse[lane].add(s, kMaxCoarseWindows); ++attempt) coarsen_all();
}

void SpanHistory::add_window(const telemetry::SpanWindow& w) {
  const auto lane = static_cast<std::size_t>(w.lane);
  if (w.device < 0 || w.device >= 1'000'000 || lane >= 3 || w.window_ns <= 0) return;
  Lanes& l = lanes(w.device);
  const WindowTotals t = totals_of(w);
  // A window longer than the series' goes where it starts (its time is not split again).
  while (w.window_ns > coarse_window_ns_ * 2) coarsen_all();
  for (int attempt = 0; attempt < 40 && !l.coarse[lane].add(w.start_ns, t, kMaxCoarseWindows); ++attempt)
    coarsen_all();
}

void SpanHistory::trim_fine(std::int64_t cutoff_ns) {
  for (auto& l : devices_)
    for (auto& f : l.fine) f.drop_before(cutoff_ns);
}

void SpanHistory::clear() {
  devices_.clear();
  coarse_window_ns_ = kCoarseWindowNs;
}

void SpanHistory::clear_fine() {
  for (auto& l : devices_)
    for (auto& f : l.fine) f.clear();
}

const WindowSeries* SpanHistory::fine(std::int32_t device, Lane lane) const {
  const auto i = static_cast<std::size_t>(lane);
  if (device < 0 || device >= static_cast<std::int32_t>(devices_.size()) || i >= 3) return nullptr;
  const WindowSeries& s = devices_[static_cast<std::size_t>(device)].fine[i];
  return s.empty() ? nullptr : &s;
}

const WindowSeries* SpanHistory::coarse(std::int32_t device, Lane lane) const {
  const auto i = static_cast<std::size_t>(lane);
  if (device < 0 || device >= static_cast<std::int32_t>(devices_.size()) || i >= 3) return nullptr;
  const WindowSeries& s = devices_[static_cast<std::size_t>(device)].coarse[i];
  return s.empty() ? nullptr : &s;
}

std::int64_t SpanHistory::begin_ns() const {
  std::int64_t b = std::numeric_limits<std::int64_t>::max();
  for (const auto& l : devices_)
    for (const auto& c : l.coarse)
      if (!c.empty()) b = std::min(b, c.begin_ns());
  return b == std::numeric_limits<std::int64_t>::max() ? 0 : b;
}

std::int64_t SpanHistory::end_ns() const {
  std::int64_t e = std::numeric_limits<std::int64_t>::min();
  for (const auto& l : devices_)
    for (const auto& c : l.coarse)
      if (!c.empty()) e = std::max(e, c.end_ns());
  return e == std::numeric_limits<std::int64_t>::min() ? 0 : e;
}

std::size_t SpanHistory::held_bytes() const {
  std::size_t n = 0;
  for (const auto& l : devices_) {
    for (const auto& f : l.fine) n += f.held_bytes();
    for (const auto& c : l.coarse) n += c.held_bytes();
  }
  return n;
}

WindowTotals SpanHistory::totals(std::int32_t device, Lane lane, std::int64_t t0, std::int64_t t1) const {
  WindowTotals t;
  const WindowSeries* c = coarse(device, lane);
  if (c == nullptr) return t;
  for (std::size_t i = c->index_at(t0); i < c->size(); ++i) {
    const std::int64_t start = c->begin_ns() + static_cast<std::int64_t>(i) * c->window_ns();
    if (start >= t1) break;
    if (start >= t0) t.add((*c)[i]);
  }
  return t;
}

}  // namespace sy::console
