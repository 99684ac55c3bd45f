#include "console/model/trace_detail.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "console/model/trace_loader.h"

namespace sy::console {

bool TraceDetail::wants_overview(const telemetry::TraceReader& reader, std::int64_t max_full_spans) {
  return reader.has_span_windows() && reader.span_count() > max_full_spans;
}

Status TraceDetail::open_overview(const telemetry::TraceReader& reader, ConsoleModel& model) {
  model.clear();
  model.set_bounded(false);
  model.spans().set_history_from_spans(false);
  auto meta = trace_run_meta(reader);
  if (meta.ok()) model.set_meta(std::move(*meta));

  auto windows = reader.span_windows();
  if (!windows.ok()) return Status::Error("reading span windows: " + windows.status().message());
  for (const auto& w : *windows) {
    model.spans().history().add_window(w);
    // The μ-queues' whole run at the detail the file keeps: each device's mean depth per window.
    if (w.lane == telemetry::Lane::Compute)
      model.queue_history().add_device_window(w.device, w.start_ns, w.window_ns, w.queue_token_ns);
  }
  model.note_range(reader.start_ns(), reader.end_ns());

  SY_RETURN_IF_ERROR(load_trace_events(reader, model));
  model.set_overview(TraceOverview{reader.span_count(), 0, 0});
  return Status::Ok();
}

std::int64_t TraceDetail::estimate_spans(const ConsoleModel& model, std::int64_t t0, std::int64_t t1) {
  const SpanHistory& h = model.spans().history();
  // Whole windows: widen to the windows' edges so that a narrow range still counts its window.
  const std::int64_t w = h.coarse_window_ns();
  const std::int64_t a = telemetry::window_start(t0, w), b = telemetry::window_start(t1, w) + w;
  std::int64_t n = 0;
  for (std::int32_t d = 0; d < model.device_count(); ++d)
    for (int l = 0; l < kLaneCount; ++l) n += h.totals(d, static_cast<telemetry::Lane>(l), a, b).spans;
  return n;
}

bool TraceDetail::range_to_read(const ConsoleModel& model, std::int64_t t0, std::int64_t t1, std::int64_t max_spans,
                                std::int64_t& a, std::int64_t& b) {
  if (!model.overview() || t1 <= t0) return false;
  const TraceOverview& held = *model.overview();
  if (!model.spans().empty() && held.detail_t0_ns <= t0 && t1 <= held.detail_t1_ns) return false;
  // Read half a view more on each side, so that panning does not read at every step.
  const std::int64_t margin = (t1 - t0) / 2;
  a = t0 - margin;
  b = t1 + margin;
  if (estimate_spans(model, a, b) <= max_spans) return true;
  a = t0;
  b = t1;
  return estimate_spans(model, a, b) <= max_spans;
}

TraceDetail::Read TraceDetail::read(const telemetry::TraceReader& reader, std::int64_t a, std::int64_t b) {
  Read r;
  r.a = a;
  r.b = b;
  auto spans = reader.spans(a, b);
  if (!spans.ok()) {
    r.status = spans.status();
    return r;
  }
  auto queues = reader.queue_samples(a, b);
  if (!queues.ok()) {
    r.status = queues.status();
    return r;
  }
  r.spans = std::move(*spans);
  r.queues = std::move(*queues);
  return r;
}

void TraceDetail::apply(ConsoleModel& model, Read& r) {
  model.spans().clear_detail();
  for (const auto& s : r.spans) model.spans().add(s);
  model.queues().clear();
  std::map<QueueKey, std::size_t> per_queue;
  std::size_t most = 0;
  for (const auto& q : r.queues) most = std::max(most, ++per_queue[{q.device, q.layer, q.block, q.index}]);
  model.queues().set_per_queue_capacity(std::max<std::size_t>(most, 16));
  for (const auto& q : r.queues) model.queues().add(q);
  model.set_overview(TraceOverview{model.overview() ? model.overview()->spans : 0, r.a, r.b});
}

StatusOr<bool> TraceDetail::ensure(const telemetry::TraceReader& reader, ConsoleModel& model, std::int64_t t0,
                                   std::int64_t t1, std::int64_t max_spans) {
  std::int64_t a = 0, b = 0;
  if (!range_to_read(model, t0, t1, max_spans, a, b)) return false;
  Read r = read(reader, a, b);
  if (!r.status.ok()) return r.status;
  apply(model, r);
  return true;
}

StatusOr<bool> TraceDetail::ensure_async(const telemetry::TraceReader& reader, ConsoleModel& model, std::int64_t t0,
                                         std::int64_t t1, std::int64_t max_spans) {
  if (pending_.valid()) {
    if (pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    Read r = pending_.get();
    if (!r.status.ok()) return r.status;
    if (!model.overview()) return false;  // the model moved on (another recording, a live run)
    apply(model, r);
    return true;
  }
  std::int64_t a = 0, b = 0;
  if (!range_to_read(model, t0, t1, max_spans, a, b)) return false;
  pending_ = std::async(std::launch::async, [&reader, a, b] { return read(reader, a, b); });
  return false;
}

}  // namespace sy::console
