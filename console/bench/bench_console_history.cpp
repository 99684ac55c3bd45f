// What the console holds of a run, and how fast: replays a recording's spans into the live model
// (the retention of a live run: time window, span budget, compressed chunks, window totals) a
// second at a time, printing spans held, the time they cover, bytes per span and ingest speed
// beside what the former 48-byte records held under their 4 M-span budget; then opens the
// recording by its overview (as the console does for a large one) and reads the spans of a
// zoomed range, printing each step's time and what the whole-run histories of the μ-queues,
// expert load and summaries hold. A benchmark, not a test.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "console/model/console_model.h"
#include "console/model/time_format.h"
#include "console/model/trace_detail.h"
#include "telemetry/trace_reader.h"

namespace {

using Clock = std::chrono::steady_clock;
using sy::console::format_count;
using sy::console::format_duration;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  double seconds = 150;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && std::strcmp(argv[i], "--seconds") == 0) {
      seconds = std::atof(argv[++i]);
    } else if (argv[i][0] != '-' && path.empty()) {
      path = argv[i];
    } else {
      std::fprintf(stderr, "usage: %s RECORDING.db [--seconds N]  (replay the first N s live; default 150)\n", argv[0]);
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: %s RECORDING.db [--seconds N]\n", argv[0]);
    return 2;
  }
  auto reader = sy::telemetry::TraceReader::open(path);
  if (!reader.ok()) {
    std::fprintf(stderr, "%s\n", reader.status().message().c_str());
    return 1;
  }
  const auto& r = **reader;
  const std::int64_t begin = r.start_ns(), end = r.end_ns();
  std::printf("recording %s: %s of run time, %s spans\n\n", path.c_str(), format_duration(end - begin).c_str(),
              format_count(static_cast<double>(r.span_count())).c_str());

  // Live: what the model holds as the run goes on.
  sy::console::ConsoleModel live;
  double read_s = 0, ingest_s = 0;
  std::uint64_t ingested = 0;
  std::size_t queue_samples = 0;
  std::printf("%10s %12s %12s %10s %12s %14s   %s\n", "run time", "spans held", "covering", "MB", "bytes/span",
              "ingest spans/s", "4 M x 48-byte records would cover");
  const std::int64_t stop = std::min<std::int64_t>(end, begin + static_cast<std::int64_t>(seconds * 1e9));
  double rate = 0;  // spans per second of run time, as stored by the model (transfers twice)
  for (std::int64_t t = begin; t < stop; t += 1'000'000'000) {
    const auto a = Clock::now();
    auto spans = r.spans(t, t + 999'999'999);
    // The μ-queue samples and expert load too, for the whole-run histories beside the spans.
    auto queues = r.queue_samples(t, t + 999'999'999);
    auto loads = r.expert_load(t, t + 999'999'999);
    read_s += since(a);
    if (!spans.ok() || !queues.ok() || !loads.ok()) return 1;
    const auto b = Clock::now();
    const std::size_t before = live.spans().size() + live.spans().evicted();
    for (const auto& s : *spans)
      if (s.start_ns >= t) live.add_span(s);  // once: spans(t0, t1) also returns those overlapping t0
    for (const auto& q : *queues) live.add_queue_sample(q);
    queue_samples += queues->size();
    for (const auto& l : *loads) live.add_expert_load(l);
    live.apply_retention();
    ingest_s += since(b);
    const std::size_t added = live.spans().size() + live.spans().evicted() - before;
    ingested += added;
    rate = static_cast<double>(added);
    const std::int64_t run = t + 1'000'000'000 - begin;
    if (run % 15'000'000'000 == 0 || t + 1'000'000'000 >= stop) {
      const auto& s = live.spans();
      std::printf("%10s %12s %12s %10.1f %12.2f %14s   %s\n", format_duration(run).c_str(),
                  format_count(static_cast<double>(s.size())).c_str(), format_duration(s.end_ns() - s.begin_ns()).c_str(),
                  static_cast<double>(s.held_bytes()) / 1e6,
                  static_cast<double>(s.held_bytes()) / static_cast<double>(std::max<std::size_t>(s.size(), 1)),
                  format_count(static_cast<double>(ingested) / std::max(ingest_s, 1e-9)).c_str(),
                  format_duration(static_cast<std::int64_t>(4e6 / std::max(rate, 1.0) * 1e9)).c_str());
    }
  }
  std::printf("\nheader: %s\n", live.describe_held().c_str());
  std::printf("window totals: %.1f MB; reading the recording took %.1f s, the model %.1f s (with %s queue samples)\n",
              static_cast<double>(live.spans().history().held_bytes()) / 1e6, read_s, ingest_s,
              format_count(static_cast<double>(queue_samples)).c_str());
  std::printf("whole-run histories: μ-queues %.2f MB, expert load %.2f MB (windows of %s)\n\n",
              static_cast<double>(live.queue_history().held_bytes()) / 1e6,
              static_cast<double>(live.load_history().held_bytes()) / 1e6,
              format_duration(live.load_history().window_ns()).c_str());

  // Post-mortem: the overview, then the spans of a zoomed range.
  sy::console::ConsoleModel model;
  auto t0 = Clock::now();
  const bool overview = sy::console::TraceDetail::wants_overview(r);
  const auto st = sy::console::TraceDetail::open_overview(r, model);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  std::printf("overview (the console uses it: %s) opened in %.2f s: %s\n", overview ? "yes" : "no, small enough to load whole",
              since(t0), model.describe_held().c_str());
  std::printf("its whole-run histories: μ-queues %.2f MB, expert load %.2f MB (windows of %s), summaries %.2f MB (%zu points); window totals %.1f MB\n",
              static_cast<double>(model.queue_history().held_bytes()) / 1e6,
              static_cast<double>(model.load_history().held_bytes()) / 1e6,
              format_duration(model.load_history().window_ns()).c_str(),
              static_cast<double>(model.summary_history().held_bytes()) / 1e6, model.summary_points().size(),
              static_cast<double>(model.spans().history().held_bytes()) / 1e6);
  sy::console::TraceDetail detail;
  for (std::int64_t range : {std::int64_t{1'000'000'000}, std::int64_t{5'000'000'000}}) {
    const std::int64_t mid = (begin + end) / 2;
    t0 = Clock::now();
    auto read = detail.ensure(r, model, mid, mid + range);
    if (!read.ok()) return 1;
    std::printf("zoom to %s: %s in %.2f s: %s\n", format_duration(range).c_str(), *read ? "read" : "not read", since(t0),
                model.describe_held().c_str());
  }
  return 0;
}
