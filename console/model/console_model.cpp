#include "console/model/console_model.h"

#include "console/model/time_format.h"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

namespace sy::console {
namespace {

constexpr std::size_t kMaxControlEvents = 10000;

}  // namespace

void ConsoleModel::note_time(std::int64_t t) {
  if (!has_time_) {
    earliest_ns_ = latest_ns_ = t;
    has_time_ = true;
    return;
  }
  earliest_ns_ = std::min(earliest_ns_, t);
  latest_ns_ = std::max(latest_ns_, t);
}

void ConsoleModel::note_error(const std::string& message) {
  ++bad_messages_;
  last_error_ = message;
}

void ConsoleModel::add_span(const telemetry::Span& s) {
  if (spans_.add(s)) {
    note_time(s.start_ns);
    note_time(s.end_ns);
  }
  ++records_;
}

void ConsoleModel::add_queue_sample(const telemetry::QueueSample& q) {
  if (queues_.add(q)) {
    queue_history_.add(q);
    note_time(q.t_ns);
  }
  ++records_;
}

void ConsoleModel::add_expert_load(const telemetry::ExpertLoad& l) {
  loads_.add(l);
  load_history_.add(l);
  note_time(l.window_end_ns);
  ++records_;
}

void ConsoleModel::add_request_event(const telemetry::RequestEvent& r) {
  requests_.add(r);
  note_time(r.t_ns);
  ++records_;
}

void ConsoleModel::add_summary_json(const std::string& object) {
  auto p = parse_summary(object);
  ++records_;
  if (!p.ok()) return note_error(p.status().message());
  note_time(p->t_end_ns);
  if (summaries_.add(*p)) summary_history_.add(*p);
}

void ConsoleModel::add_control_json(const std::string& object) {
  auto e = parse_control_event(object);
  ++records_;
  if (!e.ok()) return note_error(e.status().message());
  note_time(e->t_ns);
  // Keep time order: the stream delivers them in order, a trace may not.
  auto pos = std::upper_bound(control_events_.begin(), control_events_.end(), e->t_ns,
                              [](std::int64_t t, const ControlEvent& c) { return t < c.t_ns; });
  control_events_.insert(pos, std::move(*e));
  while (control_events_.size() > kMaxControlEvents) control_events_.pop_front();
}

void ConsoleModel::add_meta_json(const std::string& object) {
  auto m = parse_run_meta(object);
  ++records_;
  if (!m.ok()) return note_error(m.status().message());
  set_meta(std::move(*m));
}

void ConsoleModel::set_meta(RunMeta meta) {
  if (meta.now_ns > 0) note_time(meta.now_ns);
  meta_ = std::move(meta);
  ++version_;
}

void ConsoleModel::ingest(const telemetry::Batch& batch) {
  using telemetry::Topic;
  switch (batch.topic) {
    case Topic::Spans:
      for (const auto& s : batch.spans) add_span(s);
      break;
    case Topic::Queues:
      for (const auto& q : batch.queues) add_queue_sample(q);
      break;
    case Topic::ExpertLoad:
      for (const auto& l : batch.loads) add_expert_load(l);
      break;
    case Topic::Requests:
      for (const auto& r : batch.requests) add_request_event(r);
      break;
    case Topic::Control:
    case Topic::Summary:
    case Topic::Meta: {
      nlohmann::json array = nlohmann::json::parse(batch.json, nullptr, false);
      if (array.is_discarded() || !array.is_array()) {
        note_error("a " + std::string(batch.topic == Topic::Meta      ? "meta"
                                      : batch.topic == Topic::Summary ? "summary"
                                                                      : "control") +
                   " message is not a JSON array");
        break;
      }
      for (const auto& object : array) {
        const std::string text = object.dump();
        if (batch.topic == Topic::Meta)
          add_meta_json(text);
        else if (batch.topic == Topic::Summary)
          add_summary_json(text);
        else
          add_control_json(text);
      }
      break;
    }
  }
  ++version_;
}

void ConsoleModel::set_bounded(bool bounded) {
  bounded_ = bounded;
  constexpr auto kAll = std::numeric_limits<std::size_t>::max();
  queues_.set_per_queue_capacity(bounded ? 4096 : queues_.per_queue_capacity());
  // A recording's older load windows are read from the history (folded) too: an hour of them
  // exact would be the demo's 1536 records a second.
  loads_.set_max_windows(900);
  requests_.set_max_rows(bounded ? 20000 : kAll);
}

void ConsoleModel::apply_retention() {
  if (!has_time_ || !bounded_) return;
  const std::int64_t cutoff = latest_ns_ - retention_.window_ns;
  spans_.trim(cutoff, retention_.max_spans);
  queues_.trim(cutoff);
  loads_.trim(cutoff);
  summaries_.trim(cutoff);
  while (!control_events_.empty() && control_events_.front().t_ns < cutoff) control_events_.pop_front();
  // begin_ns() stays the run's start: the whole run is still held, at reduced detail.
}

void ConsoleModel::clear() {
  spans_.clear();
  spans_.set_history_from_spans(true);
  overview_.reset();
  queues_.clear();
  loads_.clear();
  summaries_.clear();
  queue_history_.clear();
  load_history_.clear();
  summary_history_.clear();
  folded_load_.reset();
  requests_.clear();
  control_events_.clear();
  meta_.reset();
  has_time_ = false;
  earliest_ns_ = latest_ns_ = 0;
  records_ = 0;
  bad_messages_ = 0;
  last_error_.clear();
  ++version_;
}

std::pair<std::int64_t, std::int64_t> ConsoleModel::queue_samples_held() const {
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  if (overview_) {
    if (queues_.queue_count() == 0) return {0, 0};
    return {overview_->detail_t0_ns, overview_->detail_t1_ns};
  }
  if (!bounded_) return {kMin, kMax};
  return {queues_.complete_from_ns(), kMax};
}

const LoadWindow* ConsoleModel::load_at(std::int64_t t_ns) const {
  const auto& held = loads_.windows();
  if (!held.empty() && t_ns >= held.front().start_ns) return loads_.at(t_ns);
  folded_load_ = load_history_.at(t_ns);
  if (folded_load_) return &*folded_load_;
  return held.empty() ? nullptr : loads_.at(t_ns);
}

std::vector<const SummaryPoint*> ConsoleModel::summary_points() const {
  const auto& held = summaries_.points();
  std::vector<const SummaryPoint*> out =
      summary_history_.points(held.empty() ? std::numeric_limits<std::int64_t>::max() : held.front().t_begin_ns);
  out.reserve(out.size() + held.size());
  for (const SummaryPoint& p : held) out.push_back(&p);
  return out;
}

const SummaryPoint* ConsoleModel::summary_at(std::int64_t t_ns) const {
  const auto& held = summaries_.points();
  if (!held.empty() && t_ns >= held.front().t_begin_ns) return summaries_.at(t_ns);
  const auto pts = summary_points();
  const SummaryPoint* best = nullptr;
  for (const SummaryPoint* p : pts) {
    if (p->t_begin_ns > t_ns) break;
    best = p;
  }
  return best;
}

std::int64_t ConsoleModel::begin_ns() const {
  return has_time_ ? earliest_ns_ : 0;
}

std::int32_t ConsoleModel::device_count() const {
  std::int32_t n = spans_.device_count();
  if (meta_) {
    n = std::max(n, static_cast<std::int32_t>(meta_->devices.size()));
    for (const auto& d : meta_->devices) n = std::max(n, d.index + 1);
  }
  return n;
}

std::string ConsoleModel::describe_held() const {
  const auto& s = spans();
  const SpanHistory& h = s.history();
  const std::string windows = "per-device windows of " + format_duration(h.coarse_window_ns());
  if (overview_) {
    // A recording opened by its overview: spans only for the range last zoomed into.
    std::string held = "overview of " + format_count(static_cast<double>(overview_->spans)) + " spans over " +
                       format_duration(end_ns() - begin_ns()) + " (" + windows + ")";
    if (s.empty()) return held + "; zoom in for spans, read from the file";
    return held + "; " + format_count(static_cast<double>(s.size())) + " spans of " +
           format_time(overview_->detail_t0_ns, 1'000'000) + " .. " + format_time(overview_->detail_t1_ns, 1'000'000) +
           " read from the file";
  }
  std::string held = format_count(static_cast<double>(s.size())) + " spans";
  if (!bounded_) return held + ", whole recording";
  held += " over the last " + format_duration(s.end_ns() - s.begin_ns());
  held += " in " + format_count(static_cast<double>(s.held_bytes()) / 1e6) + " MB";
  if (s.size() >= retention_.max_spans * 95 / 100) {
    held += " (the " + format_count(static_cast<double>(retention_.max_spans)) + "-span limit, reached before " +
            format_duration(retention_.window_ns);
  } else {
    held += " (kept up to " + format_duration(retention_.window_ns) + " or " +
            format_count(static_cast<double>(retention_.max_spans)) + " spans";
  }
  if (s.evicted() > 0) held += "; " + format_count(static_cast<double>(s.evicted())) + " dropped so far";
  held += ")";
  if (h.end_ns() > h.begin_ns())
    held += "; the whole run (" + format_duration(h.end_ns() - h.begin_ns()) + ") in " + windows;
  return held;
}

}  // namespace sy::console
