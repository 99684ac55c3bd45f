// Opening a large recording by its overview: the whole-run windows of its SPAN_WINDOWS table
// (no span decoded) first, then the spans of the range the timeline zooms into,
// read from the file's blocks when that range holds few enough of them.
#pragma once

#include <cstdint>
#include <future>
#include <vector>

#include "base/status.h"
#include "console/model/console_model.h"
#include "telemetry/trace_reader.h"

namespace sy::console {

class TraceDetail {
 public:
  // Recordings holding more spans than this open by their overview (when they have one).
  static constexpr std::int64_t kMaxFullSpans = 4'000'000;
  // A zoomed range is read from the file when its windows count at most this many spans.
  static constexpr std::int64_t kMaxDetailSpans = 3'000'000;

  static bool wants_overview(const telemetry::TraceReader& reader, std::int64_t max_full_spans = kMaxFullSpans);
  // Clears `model` and loads the metadata, the whole-run windows, requests, summaries, control
  // events and expert load; spans and queue samples wait for ensure(). Errors name the table.
  static Status open_overview(const telemetry::TraceReader& reader, ConsoleModel& model);

  // Makes `model` hold the spans and queue samples around [t0, t1] when the windows say the
  // range holds at most `max_spans` spans and what is held does not cover it already. Returns
  // whether it read the file.
  StatusOr<bool> ensure(const telemetry::TraceReader& reader, ConsoleModel& model, std::int64_t t0, std::int64_t t1,
                        std::int64_t max_spans = kMaxDetailSpans);
  // The same without blocking the caller (the UI thread): a needed read runs on a thread of its
  // own, one at a time, and a later call moves its result into the model (returning true then).
  // `reader` must outlive the read: destroying or reassigning this object waits for it.
  StatusOr<bool> ensure_async(const telemetry::TraceReader& reader, ConsoleModel& model, std::int64_t t0,
                              std::int64_t t1, std::int64_t max_spans = kMaxDetailSpans);
  bool reading() const { return pending_.valid(); }

  // Spans the windows count in [t0, t1) over every device lane.
  static std::int64_t estimate_spans(const ConsoleModel& model, std::int64_t t0, std::int64_t t1);

 private:
  struct Read {
    std::int64_t a = 0, b = 0;
    Status status;
    std::vector<telemetry::Span> spans;
    std::vector<telemetry::QueueSample> queues;
  };
  // The range to read for a view of [t0, t1], or false when none is needed or allowed.
  static bool range_to_read(const ConsoleModel& model, std::int64_t t0, std::int64_t t1, std::int64_t max_spans,
                            std::int64_t& a, std::int64_t& b);
  static Read read(const telemetry::TraceReader& reader, std::int64_t a, std::int64_t b);
  static void apply(ConsoleModel& model, Read& r);

  std::future<Read> pending_;
};

}  // namespace sy::console
