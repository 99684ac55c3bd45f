// What telemetry costs a serving run: the same workload served with telemetry off, with the
// stream on (one subscriber draining it, as a console would), and with the stream plus a
// SQLite recording in each trace format (schema 1 rows, schema 2 blocks with zstd or LZ4, and
// zstd blocks plus the per-second SPAN_WINDOWS overview, the default), in interleaved
// repetitions of one run; prints wall-clock tokens/s and the ratios against off, and for the
// recordings the file's bytes per span and the spans written per wall second: zstd without and
// with windows is the overview's cost, before and after, in one run.
//
// Wall time on a shared machine swings by tens of percent between runs, so the ratio that
// decides is the engine thread's own CPU time per cluster second (CLOCK_THREAD_CPUTIME_ID on
// the thread that runs the event loop): the recorder's writer, the publisher and the drain run
// on threads of their own, so with a core to spare the engine thread's time is what sets
// throughput, and other processes' load does not enter it. The CPU time of the other threads
// (process CPU less the engine thread's) is printed beside it. --paced also serves a few
// cluster seconds at pace 1 (the demo's real time) with telemetry off and recording, and prints
// how far wall time fell behind cluster time.
// A benchmark, not a test.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <time.h>

#include <CLI/CLI.hpp>
#include <sqlite3.h>

#include "engine/cli/live_telemetry.h"
#include "engine/model/random_model.h"
#include "engine/cpu/cpu_deployment.h"
#include "engine/sim/sim_deployment.h"
#include "kernels/cpu/gemm.h"
#include "telemetry/subscriber.h"

namespace {

using namespace sy;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

enum class Mode { Off, StreamOnly, Stream, RecordRows, RecordZstd, RecordLz4, RecordWindows };
constexpr Mode kModes[] = {Mode::Off,        Mode::StreamOnly, Mode::Stream,       Mode::RecordRows,
                           Mode::RecordZstd, Mode::RecordLz4,  Mode::RecordWindows};
const char* mode_name(Mode m) {
  switch (m) {
    case Mode::Off: return "off";
    case Mode::StreamOnly: return "stream, no subscriber";
    case Mode::Stream: return "stream + 1 subscriber";
    case Mode::RecordRows: return "+ recording, v1 rows";
    case Mode::RecordZstd: return "+ recording, v2 blocks zstd";
    case Mode::RecordLz4: return "+ recording, v2 blocks lz4";
    case Mode::RecordWindows: return "+ recording, zstd+windows";
  }
  return "?";
}
bool records(Mode m) {
  return m == Mode::RecordRows || m == Mode::RecordZstd || m == Mode::RecordLz4 || m == Mode::RecordWindows;
}

struct Outcome {
  double tokens_per_s = 0;
  double engine_cpu_per_cluster_s = 0;  // the engine thread's CPU seconds per cluster second
  double other_cpu_per_cluster_s = 0;   // the other threads' (writer, publisher, drain)
  double wall_per_cluster_s = 0;        // paced runs: 1 keeps pace
  double bytes_per_span = 0;   // the whole file over its spans
  double spans_per_s = 0;      // spans in the file per wall second of the run
  double file_mb = 0;
};

// Spans in a trace of either schema.
std::int64_t count_spans(const fs::path& file, bool rows) {
  sqlite3* db = nullptr;
  std::int64_t n = 0;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    const char* sql = rows ? "SELECT COUNT(*) FROM SPANS" : "SELECT SUM(count) FROM SPAN_BLOCKS";
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Setup {
  std::string name;
  std::function<std::unique_ptr<Deployment>(double pace)> make;
  RunInfo info;
  std::vector<RequestSpec> requests;
};

// Serves the setup's workload once in `mode`.
Outcome run_once(const Setup& s, Mode mode, const fs::path& scratch, double pace = 0) {
  std::unique_ptr<cli::LiveTelemetry> live;
  std::unique_ptr<telemetry::Subscriber> sub;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> received{0};
  std::thread drain;
  if (mode != Mode::Off) {
    cli::TelemetryFlags flags;
    flags.telemetry = "tcp://127.0.0.1:0";
    flags.control = "tcp://127.0.0.1:0";
    if (records(mode)) {
      fs::remove(scratch);
      flags.record = scratch;
      flags.record_format = mode == Mode::RecordRows ? telemetry::TraceFormat::Rows : telemetry::TraceFormat::Blocks;
      flags.record_codec = mode == Mode::RecordLz4 ? telemetry::BlockCodec::Lz4 : telemetry::BlockCodec::Zstd;
      flags.record_windows = mode == Mode::RecordWindows;
    }
    live = cli::LiveTelemetry::start(flags);
    if (mode != Mode::StreamOnly) {
      auto connected = telemetry::Subscriber::connect(live->telemetry_endpoint());
      if (connected.ok()) sub = std::move(connected).value();
      drain = std::thread([&] {
        while (!stop) received += sub ? sub->poll(std::chrono::milliseconds(20)).size() : 0;
      });
    }
  }
  auto d = s.make(pace);
  d->submit(s.requests);
  if (live) live->attach(*d, s.info, {});
  const double process0 = process_cpu_s();
  const double cpu0 = thread_cpu_s();
  const auto t0 = Clock::now();
  const std::int64_t end_ns = d->run();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double engine_cpu = thread_cpu_s() - cpu0;
  const double other_cpu = process_cpu_s() - process0 - engine_cpu;
  if (live) live->detach();
  stop = true;
  if (drain.joinable()) drain.join();
  live.reset();  // stops the recording (indexes), outside the timed part
  std::int64_t tokens = 0;
  for (const RequestRecord& r : d->coordinator().requests()) tokens += static_cast<std::int64_t>(r.output.size());
  Outcome o;
  o.tokens_per_s = static_cast<double>(tokens) / wall;
  const double cluster_s = static_cast<double>(end_ns) * 1e-9;
  if (cluster_s > 0) {
    o.engine_cpu_per_cluster_s = engine_cpu / cluster_s;
    o.other_cpu_per_cluster_s = other_cpu / cluster_s;
    o.wall_per_cluster_s = wall / cluster_s;
  }
  if (records(mode)) {
    std::error_code ec;
    const auto bytes = static_cast<double>(fs::file_size(scratch, ec));
    const auto spans = static_cast<double>(count_spans(scratch, mode == Mode::RecordRows));
    o.file_mb = bytes / 1e6;
    o.bytes_per_span = spans > 0 ? bytes / spans : 0;
    o.spans_per_s = spans / wall;
  }
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Telemetry overhead: tokens per wall second with telemetry off, streaming, and recording"};
  int repetitions = 5;
  int threads = 1;
  app.add_option("--repetitions", repetitions, "Interleaved runs per mode (the median is reported)")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads for the cpu backend's kernels")->capture_default_str();
  bool sim_only = false;
  app.add_flag("--sim-only", sim_only, "Only the unpaced simulator (the demo's cluster), not the cpu backend");
  bool paced = false;
  app.add_flag("--paced", paced, "Also serve the simulator at pace 1 (real time) with telemetry off and recording");
  std::vector<std::string> only;
  app.add_option("--only", only,
                 "Only these modes (off, stream-only, stream, rows, zstd, lz4, windows): to profile one, e.g. with perf");
  double paced_s = 3;
  app.add_option("--paced-seconds", paced_s, "Cluster seconds of arrivals in each paced run")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  kernels::set_num_threads(threads);
  auto wanted = [&](Mode m) {
    static constexpr const char* kKeys[] = {"off", "stream-only", "stream", "rows", "zstd", "lz4", "windows"};
    return only.empty() || std::find(only.begin(), only.end(), kKeys[static_cast<int>(m)]) != only.end();
  };
  const fs::path scratch = fs::temp_directory_path() / ("sy_bench_telemetry_" + std::to_string(::getpid()));
  fs::create_directories(scratch);

  std::vector<Setup> setups;
  if (!sim_only) {
    // The cpu backend on the tiny model: real kernels, so telemetry competes with real math.
    const fs::path dir = scratch / "tiny";
    ModelConfig c = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::BF16);
    if (!write_random_model(c, 1, dir).ok()) return 1;
    auto weights = ModelWeights::load(dir);
    if (!weights.ok()) return 1;
    Setup s;
    s.name = "cpu, tiny Mixtral, disaggregated 2+4, async";
    s.make = [w = *weights](double) {
      DeploymentOptions o;
      o.skew_lambda = 0.5;
      o.coordinator.max_batch_per_rank = 64;
      return std::unique_ptr<Deployment>(new CpuDeployment(w, Topology::disaggregated(w->config(), 2, 4), o));
    };
    s.info.backend = "cpu";
    s.info.model = c;
    WorkloadSpec w;
    w.length_class = LengthClass::Short;
    w.rate_per_s = 200;
    w.duration_s = 2;
    w.vocab_size = c.vocab_size;
    s.requests = generate_workload(w);
    setups.push_back(std::move(s));
  }
  {
    // The simulator at full speed: the engine does nothing but scheduling and bookkeeping, the
    // worst case for any per-event cost.
    auto hw = find_hardware_profile("h100");
    auto c = ModelConfig::from_file(assets_dir() / "models" / "mixtral-8x7b" / "config.json");
    if (!hw.ok() || !c.ok()) return 1;
    Setup s;
    s.name = "sim, Mixtral-8x7B on 8 H100 (4+4), async, unpaced";
    s.make = [hw = *hw, c = *c](double pace) {
      DeploymentOptions o;
      o.pace = pace;
      o.skew_lambda = 0.5;
      o.link = profile_links(hw, 8);
      o.coordinator.max_batch_per_rank = 64;
      return std::unique_ptr<Deployment>(new SimDeployment(c, hw, Topology::disaggregated(c, 4, 4), o));
    };
    s.info.backend = "sim";
    s.info.model = *c;
    WorkloadSpec w;
    w.length_class = LengthClass::Short;
    w.rate_per_s = 60;
    w.duration_s = 5;
    w.vocab_size = c->vocab_size;
    s.requests = generate_workload(w);
    setups.push_back(std::move(s));
  }

  // engine cpu/s: the engine thread's CPU seconds per cluster second; its ratios are off's (and
  // for a recording, the stream's: the demo always streams, so that is recording on vs off).
  std::printf("%-52s %-28s %14s %8s %12s %8s %10s %12s %10s %14s %9s\n", "setup", "telemetry", "tokens/wall s",
              "ratio", "engine cpu/s", "vs off", "vs stream", "other cpu/s", "bytes/span", "spans/wall s", "file MB");
  for (const Setup& s : setups) {
    std::vector<Outcome> by_mode[std::size(kModes)];
    for (int r = 0; r < repetitions; ++r)
      for (Mode m : kModes)
        if (wanted(m)) by_mode[static_cast<int>(m)].push_back(run_once(s, m, scratch / "trace.db"));
    auto med = [&](Mode m, double Outcome::*field) {
      std::vector<double> v;
      for (const Outcome& o : by_mode[static_cast<int>(m)]) v.push_back(o.*field);
      return v.empty() ? 0.0 : median(v);
    };
    const double off = med(Mode::Off, &Outcome::tokens_per_s);
    const double off_cpu = med(Mode::Off, &Outcome::engine_cpu_per_cluster_s);
    for (Mode m : kModes) {
      if (!wanted(m)) continue;
      const double v = med(m, &Outcome::tokens_per_s);
      const double cpu = med(m, &Outcome::engine_cpu_per_cluster_s);
      // The engine thread's ratio: the throughput it allows against off (off's CPU over this).
      const double stream_cpu = med(Mode::Stream, &Outcome::engine_cpu_per_cluster_s);
      std::printf("%-52s %-28s %14.0f %7.3fx %12.4f %7.3fx", s.name.c_str(), mode_name(m), v, off > 0 ? v / off : 0.0,
                  cpu, cpu > 0 ? off_cpu / cpu : 0.0);
      if (records(m) && cpu > 0 && stream_cpu > 0)
        std::printf(" %9.3fx", stream_cpu / cpu);
      else
        std::printf(" %10s", "");
      std::printf(" %12.4f", med(m, &Outcome::other_cpu_per_cluster_s));
      if (records(m)) {
        std::printf(" %10.2f %14.0f %9.1f", med(m, &Outcome::bytes_per_span), med(m, &Outcome::spans_per_s),
                    med(m, &Outcome::file_mb));
      }
      std::printf("\n");
    }
  }
  if (paced) {
    // The demo's cluster in real time: with the recording on it must keep pace as with it off.
    Setup s = setups.back();
    WorkloadSpec w;
    w.length_class = LengthClass::Short;
    w.rate_per_s = 60;
    w.duration_s = paced_s;
    w.vocab_size = s.info.model.vocab_size;
    s.requests = generate_workload(w);
    std::printf("\n%-52s %-28s %16s %12s %8s\n", "paced (pace 1)", "telemetry", "wall / cluster s", "engine cpu/s",
                "ratio");
    std::vector<Outcome> off_runs, rec_runs;
    for (int r = 0; r < std::max(1, repetitions / 2); ++r) {
      off_runs.push_back(run_once(s, Mode::Off, scratch / "trace.db", 1.0));
      rec_runs.push_back(run_once(s, Mode::RecordWindows, scratch / "trace.db", 1.0));
    }
    auto med = [](const std::vector<Outcome>& v, double Outcome::*field) {
      std::vector<double> x;
      for (const Outcome& o : v) x.push_back(o.*field);
      return median(x);
    };
    const double off_cpu = med(off_runs, &Outcome::engine_cpu_per_cluster_s);
    for (const auto* runs : {&off_runs, &rec_runs}) {
      const double cpu = med(*runs, &Outcome::engine_cpu_per_cluster_s);
      std::printf("%-52s %-28s %16.4f %12.4f %7.3fx\n", "sim, Mixtral-8x7B on 8 H100 (4+4), paced",
                  runs == &off_runs ? mode_name(Mode::Off) : mode_name(Mode::RecordWindows),
                  med(*runs, &Outcome::wall_per_cluster_s), cpu, cpu > 0 ? off_cpu / cpu : 0.0);
    }
  }
  fs::remove_all(scratch);
  return 0;
}
