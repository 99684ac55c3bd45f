// What telemetry costs a serving run: the same workload served with telemetry off, with the
// stream on (one subscriber draining it, as a console would), and with the stream plus a
// SQLite recording in each trace format (schema 1 rows, schema 2 blocks with zstd or LZ4, and
// zstd blocks plus the per-second SPAN_WINDOWS overview, the default), in interleaved
// repetitions of one run; prints wall-clock tokens/s and the ratios against off, and for the
// recordings the file's bytes per span and the spans written per wall second: zstd without and
// with windows is the overview's cost, before and after, in one run.
// A benchmark, not a test.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

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

struct Setup {
  std::string name;
  std::function<std::unique_ptr<Deployment>()> make;
  RunInfo info;
  std::vector<RequestSpec> requests;
};

// Serves the setup's workload once in `mode`.
Outcome run_once(const Setup& s, Mode mode, const fs::path& scratch) {
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
  auto d = s.make();
  d->submit(s.requests);
  if (live) live->attach(*d, s.info, {});
  const auto t0 = Clock::now();
  d->run();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  if (live) live->detach();
  stop = true;
  if (drain.joinable()) drain.join();
  live.reset();  // stops the recording (indexes), outside the timed part
  std::int64_t tokens = 0;
  for (const RequestRecord& r : d->coordinator().requests()) tokens += static_cast<std::int64_t>(r.output.size());
  Outcome o;
  o.tokens_per_s = static_cast<double>(tokens) / wall;
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
  CLI11_PARSE(app, argc, argv);
  kernels::set_num_threads(threads);
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
    s.make = [w = *weights] {
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
    s.make = [hw = *hw, c = *c] {
      DeploymentOptions o;
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

  std::printf("%-52s %-28s %14s %8s %10s %14s %9s\n", "setup", "telemetry", "tokens/wall s", "ratio", "bytes/span",
              "spans/wall s", "file MB");
  for (const Setup& s : setups) {
    std::vector<Outcome> by_mode[std::size(kModes)];
    for (int r = 0; r < repetitions; ++r)
      for (Mode m : kModes) by_mode[static_cast<int>(m)].push_back(run_once(s, m, scratch / "trace.db"));
    auto med = [&](Mode m, double Outcome::*field) {
      std::vector<double> v;
      for (const Outcome& o : by_mode[static_cast<int>(m)]) v.push_back(o.*field);
      return median(v);
    };
    const double off = med(Mode::Off, &Outcome::tokens_per_s);
    for (Mode m : kModes) {
      const double v = med(m, &Outcome::tokens_per_s);
      std::printf("%-52s %-28s %14.0f %7.3fx", s.name.c_str(), mode_name(m), v, v / off);
      if (records(m)) {
        std::printf(" %10.2f %14.0f %9.1f", med(m, &Outcome::bytes_per_span), med(m, &Outcome::spans_per_s),
                    med(m, &Outcome::file_mb));
      }
      std::printf("\n");
    }
  }
  fs::remove_all(scratch);
  return 0;
}
