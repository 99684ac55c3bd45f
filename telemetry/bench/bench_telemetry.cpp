// Cost of telemetry on the hot path and of recording: ns per span pushed by a worker (ring
// alone with a consumer draining it, and through a running hub), and rows/s the SQLite
// recorder commits.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "telemetry/span_windows.h"
#include "telemetry/spsc_ring.h"
#include "telemetry/telemetry_hub.h"
#include "telemetry/trace_recorder.h"

namespace {

using namespace sy::telemetry;

Span make_span(std::int64_t i) {
  Span s;
  s.start_ns = i * 1000;
  s.end_ns = i * 1000 + 900;
  s.tokens = 16;
  s.device = 3;
  s.block = static_cast<std::int32_t>(i % 32);
  s.index = static_cast<std::int32_t>(i % 8);
  s.kind = SpanKind::Expert;
  return s;
}

// What a worker pays per span on its hot path: Producer::span into a ring with room (the
// publisher drains between rounds, outside the timing).
void BM_ProducerSpan(benchmark::State& state) {
  HubOptions options;
  options.drain_interval = std::chrono::hours(1);  // only flush() drains, between timed rounds
  auto hub = TelemetryHub::start(options);
  if (!hub.ok()) {
    state.SkipWithError(hub.status().message().c_str());
    return;
  }
  Producer& producer = (*hub)->add_producer("bench");
  constexpr int kRound = 4096;
  std::int64_t i = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < kRound; ++k) benchmark::DoNotOptimize(producer.span(make_span(i++)));
    const auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    (*hub)->flush();
  }
  state.SetItemsProcessed(state.iterations() * kRound);
  state.counters["ns_per_span"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kRound), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["dropped"] = static_cast<double>(producer.dropped());
}
BENCHMARK(BM_ProducerSpan)->UseManualTime();

// The same push while another core drains the ring as fast as it can: the cost with the
// consumer's cache-line traffic, and how much a ring of 8192 drops when nobody paces the producer.
void BM_RingPushWithConsumer(benchmark::State& state) {
  SpscRing<Span> ring(8192);
  std::atomic<bool> stop{false};
  std::thread consumer([&] {
    std::vector<Span> buf(4096);
    while (!stop.load(std::memory_order_relaxed)) {
      if (ring.pop(buf.data(), buf.size()) == 0) std::this_thread::yield();
    }
  });
  std::int64_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ring.push(make_span(i++)));
  }
  stop = true;
  consumer.join();
  state.SetItemsProcessed(state.iterations());
  state.counters["dropped_fraction"] =
      static_cast<double>(ring.dropped()) / static_cast<double>(std::max<std::int64_t>(state.iterations(), 1));
}
BENCHMARK(BM_RingPushWithConsumer);

// The publisher's side: spans pushed, drained, batched and sent on a PUB socket per second
// (no subscriber connected, so this is the hub's own cost).
void BM_HubPublish(benchmark::State& state) {
  HubOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  options.drain_interval = std::chrono::hours(1);
  auto hub = TelemetryHub::start(options);
  if (!hub.ok()) {
    state.SkipWithError(hub.status().message().c_str());
    return;
  }
  Producer& producer = (*hub)->add_producer("bench");
  constexpr int kRound = 8192;
  std::int64_t i = 0;
  for (auto _ : state) {
    for (int k = 0; k < kRound; ++k) producer.span(make_span(i++));
    (*hub)->flush();
  }
  state.SetItemsProcessed(state.iterations() * kRound);
  state.counters["dropped"] = static_cast<double>(producer.dropped());
}
BENCHMARK(BM_HubPublish)->UseRealTime();

// Rows committed per second by the recorder: batches of `range(0)` spans, until all are on disk.
void BM_RecorderSpans(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  std::vector<Span> spans(batch);
  for (std::size_t i = 0; i < batch; ++i) spans[i] = make_span(static_cast<std::int64_t>(i));
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("bench_telemetry_" + std::to_string(::getpid()) + ".db");
  RecorderOptions options;
  options.path = path;
  options.overwrite = true;
  auto recorder = TraceRecorder::open(options);
  if (!recorder.ok()) {
    state.SkipWithError(recorder.status().message().c_str());
    return;
  }
  for (auto _ : state) {
    (*recorder)->add(spans);
    if (!(*recorder)->flush().ok()) state.SkipWithError("recorder write failed");
  }
  const RecorderStats stats = (*recorder)->stats();
  (void)(*recorder)->stop();
  std::filesystem::remove(path);
  state.SetItemsProcessed(static_cast<std::int64_t>(stats.records_written));
  state.counters["rows_per_s"] =
      benchmark::Counter(static_cast<double>(stats.records_written), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RecorderSpans)->Arg(4096)->Arg(65536)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

// What the recorder's per-second overview (SPAN_WINDOWS) adds per span on its writer thread:
// spans of 8 devices, 0.9 µs each, through the window accumulator, windows closed as it goes.
void BM_SpanWindowAccumulator(benchmark::State& state) {
  SpanWindowAccumulator acc;
  std::vector<SpanWindow> out;
  std::int64_t i = 0;
  for (auto _ : state) {
    Span s = make_span(i);
    s.device = static_cast<std::int32_t>(i % 8);
    acc.add(s);
    if (++i % 65536 == 0) {
      out.clear();
      acc.close_before(acc.latest_ns() - 2 * acc.window_ns(), out);
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SpanWindowAccumulator);

BENCHMARK_MAIN();
