#include "telemetry/trace_rows_export.h"

#include <algorithm>
#include <limits>

#include "telemetry/trace_recorder.h"

namespace sy::telemetry {

Status export_row_trace(const TraceReader& trace, const std::filesystem::path& path) {
  RecorderOptions options;
  options.path = path;
  options.format = TraceFormat::Rows;
  // Nothing may be dropped: each chunk is flushed before the next is read.
  options.max_queued_records = std::numeric_limits<std::size_t>::max();
  options.device_names = trace.device_names();
  // The source's description; the recorder writes its own bookkeeping keys.
  for (const auto& [k, v] : trace.metadata()) {
    if (k == "schema_version" || k == "block_codec" || k == "complete" || k == "started_unix_ns" ||
        k == "stopped_unix_ns" || k == "records_written" || k == "records_dropped" || k == "size_capped")
      continue;
    options.metadata[k] = v;
  }
  options.metadata["converted_from_schema_version"] = std::to_string(trace.schema_version());
  auto recorder = TraceRecorder::open(std::move(options));
  if (!recorder.ok()) return recorder.status();
  TraceRecorder& r = **recorder;

  const std::int64_t t_begin = trace.start_ns();
  const std::int64_t t_end = trace.end_ns();
  const std::int64_t chunk = std::max<std::int64_t>((t_end - t_begin) / 256 + 1, 1'000'000'000);
  for (std::int64_t t0 = t_begin; t0 <= t_end; t0 += chunk) {
    const std::int64_t t1 = t0 + chunk - 1;
    // Each span once: by the chunk its start falls in (the first also takes earlier starts).
    auto spans = trace.spans(t0, t1);
    if (!spans.ok()) return spans.status();
    std::erase_if(*spans, [&](const Span& s) { return s.start_ns > t1 || (s.start_ns < t0 && t0 != t_begin); });
    r.add(std::span<const Span>(*spans));
    auto queues = trace.queue_samples(t0 == t_begin ? TraceReader::kMin : t0, t1);
    if (!queues.ok()) return queues.status();
    r.add(std::span<const QueueSample>(*queues));
    if (Status s = r.flush(); !s.ok()) return s;
  }
  auto loads = trace.expert_load();
  if (!loads.ok()) return loads.status();
  r.add(std::span<const ExpertLoad>(*loads));
  auto requests = trace.requests();
  if (!requests.ok()) return requests.status();
  r.add(std::span<const RequestEvent>(*requests));
  auto control = trace.control_events();
  if (!control.ok()) return control.status();
  for (std::string& text : *control) r.add_json(Topic::Control, std::move(text));
  auto summaries = trace.summaries();
  if (!summaries.ok()) return summaries.status();
  for (std::string& text : *summaries) r.add_json(Topic::Summary, std::move(text));
  return r.stop();
}

}  // namespace sy::telemetry
