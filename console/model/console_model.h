// Everything the console knows about one run, fed by telemetry batches (live) or a recorded
// trace (post-mortem): spans, queue depths, expert load, summaries, requests, control events and
// run metadata, with the live retention that bounds memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "console/model/control_event.h"
#include "console/model/expert_load_store.h"
#include "console/model/load_history.h"
#include "console/model/queue_history.h"
#include "console/model/queue_store.h"
#include "console/model/request_table.h"
#include "console/model/run_meta.h"
#include "console/model/span_store.h"
#include "console/model/summary_history.h"
#include "console/model/summary_store.h"
#include "telemetry/wire.h"

namespace sy::console {

// How much of a live run the console keeps: the last `window_ns` of run time, and at most
// `max_spans` spans (the oldest go first when the stream is denser than the window allows).
struct Retention {
  std::int64_t window_ns = 120'000'000'000;  // 2 minutes
  // Spans are held compressed (lane_spans.h): about 4 bytes each on the demo, so this is about
  // 400 MB, and the demo's 2 minutes (about 70 M spans) fit.
  std::size_t max_spans = 100'000'000;
};

// A recording opened by its overview (trace_detail.h): what the file holds, and which range of
// its spans the model holds now.
struct TraceOverview {
  std::int64_t spans = 0;  // in the whole file
  std::int64_t detail_t0_ns = 0, detail_t1_ns = 0;  // spans held: those overlapping this range
};

class ConsoleModel {
 public:
  ConsoleModel() = default;

  // Takes one decoded batch of any topic. JSON that does not parse is counted and its error
  // kept (last_error()); the rest of the batch is still taken.
  void ingest(const telemetry::Batch& batch);

  void add_span(const telemetry::Span& s);
  void add_queue_sample(const telemetry::QueueSample& q);
  void add_expert_load(const telemetry::ExpertLoad& l);
  void add_request_event(const telemetry::RequestEvent& r);
  void add_summary_json(const std::string& object);
  void add_control_json(const std::string& object);
  void add_meta_json(const std::string& object);
  void set_meta(RunMeta meta);

  // Live runs are bounded (retention, per-queue ring buffers, recent windows and requests); a
  // trace is not, so that the whole recording shows. clear() keeps the setting.
  void set_bounded(bool bounded);
  bool bounded() const { return bounded_; }
  // Drops what is older than the retention allows; nothing when unbounded.
  void apply_retention();
  void set_retention(const Retention& r) { retention_ = r; }
  const Retention& retention() const { return retention_; }
  // What the timeline holds, in words: how many spans over how long, and for a live run which
  // limit decides that (the time window, or the span count that cuts it shorter).
  std::string describe_held() const;
  void clear();

  const SpanStore& spans() const { return spans_; }
  SpanStore& spans() { return spans_; }
  // Set while the model shows a recording by its overview; null otherwise.
  const std::optional<TraceOverview>& overview() const { return overview_; }
  void set_overview(std::optional<TraceOverview> o) { overview_ = o; ++version_; }
  const QueueStore& queues() const { return queues_; }
  QueueStore& queues() { return queues_; }
  const ExpertLoadStore& loads() const { return loads_; }
  ExpertLoadStore& loads() { return loads_; }
  const SummaryStore& summaries() const { return summaries_; }

  // The whole run at reduced detail, beside what retention keeps (queue_history.h,
  // load_history.h, summary_history.h).
  const QueueHistory& queue_history() const { return queue_history_; }
  QueueHistory& queue_history() { return queue_history_; }
  const LoadHistory& load_history() const { return load_history_; }
  const SummaryHistory& summary_history() const { return summary_history_; }
  // The time range whose μ-queue samples are held (live: since retention or a full ring last
  // dropped one; a recording read by its overview: the range last read); the heatmap draws the
  // rest from queue_history(). Empty (a == b) when none are held.
  std::pair<std::int64_t, std::int64_t> queue_samples_held() const;
  // The expert-load window at t: an exact one while held, else the folded window of the
  // history; null when there is none. Valid until the next call or change.
  const LoadWindow* load_at(std::int64_t t_ns) const;
  // The window summaries to chart, in time order: the history's folded windows before the
  // first held summary, then the held ones.
  std::vector<const SummaryPoint*> summary_points() const;
  // The summary window holding t (or the last before it), held or folded; null when none.
  const SummaryPoint* summary_at(std::int64_t t_ns) const;
  const RequestTable& requests() const { return requests_; }
  RequestTable& requests() { return requests_; }
  const std::deque<ControlEvent>& control_events() const { return control_events_; }
  const std::optional<RunMeta>& meta() const { return meta_; }

  // Earliest and latest time of anything held, at any detail (0, 0 when empty): a live run's
  // begin stays its start after retention dropped the spans of that time.
  std::int64_t begin_ns() const;
  std::int64_t end_ns() const { return has_time_ ? latest_ns_ : 0; }
  // Widens the time range to [begin_ns, end_ns] (a recording's bounds, before its detail is read).
  void note_range(std::int64_t begin_ns, std::int64_t end_ns) {
    note_time(begin_ns);
    note_time(end_ns);
  }
  std::int32_t device_count() const;

  std::uint64_t records() const { return records_; }
  std::uint64_t bad_messages() const { return bad_messages_; }
  const std::string& last_error() const { return last_error_; }
  // Bumped on every change; views cache derived data against it.
  std::uint64_t version() const { return version_; }

 private:
  void note_time(std::int64_t t);
  void note_error(const std::string& message);

  SpanStore spans_;
  QueueStore queues_;
  ExpertLoadStore loads_;
  SummaryStore summaries_;
  QueueHistory queue_history_;
  LoadHistory load_history_;
  SummaryHistory summary_history_;
  mutable std::optional<LoadWindow> folded_load_;
  RequestTable requests_;
  std::deque<ControlEvent> control_events_;
  std::optional<RunMeta> meta_;
  std::optional<TraceOverview> overview_;
  Retention retention_;
  bool bounded_ = true;
  bool has_time_ = false;
  std::int64_t earliest_ns_ = 0;
  std::int64_t latest_ns_ = 0;
  std::uint64_t records_ = 0;
  std::uint64_t bad_messages_ = 0;
  std::string last_error_;
  std::uint64_t version_ = 0;
};

}  // namespace sy::console
