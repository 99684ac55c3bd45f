// `switchyard trace summarize|compare|export-chrome|export-spans`: reads a recorded SQLite trace
// (docs/trace-schema.md) and prints its summary or its per-device difference from another run,
// converts it into Chrome trace-event JSON for Perfetto, or writes it with a plain row per span
// for ad-hoc SQL.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/cli/number_validators.h"
#include "telemetry/chrome_trace_export.h"
#include "telemetry/trace_compare.h"
#include "telemetry/trace_reader.h"
#include "telemetry/trace_rows_export.h"
#include "telemetry/trace_summary.h"

namespace sy::cli {
namespace {

struct TraceArgs {
  std::filesystem::path file;
  std::filesystem::path other;  // compare: run B
  std::filesystem::path out;
  int top = 5;
  std::optional<double> from_s, to_s;  // seconds after the trace's start
  std::string devices;                 // comma-separated indices or names
};

// The telemetry library has its own Status (it depends on nothing of ours).
std::unique_ptr<telemetry::TraceReader> open_trace(const std::filesystem::path& file) {
  auto reader = telemetry::TraceReader::open(file);
  check(reader.status());
  return std::move(reader).value();
}

void summarize(const TraceArgs& a) {
  auto reader = open_trace(a.file);
  auto summary = telemetry::summarize_trace(*reader, a.top);
  check(summary.status());
  std::printf("trace %s\n%s", a.file.string().c_str(), telemetry::format_trace_summary(*summary).c_str());
}

// "0,3,e1" → device indices; names are looked up in the trace.
std::set<std::int32_t> parse_devices(const std::string& spec, const std::vector<std::string>& names) {
  std::set<std::int32_t> out;
  std::size_t begin = 0;
  while (begin <= spec.size()) {
    const std::size_t end = std::min(spec.find(',', begin), spec.size());
    const std::string item = spec.substr(begin, end - begin);
    begin = end + 1;
    if (item.empty()) continue;
    auto named = std::find(names.begin(), names.end(), item);
    if (named != names.end()) {
      out.insert(static_cast<std::int32_t>(named - names.begin()));
      continue;
    }
    char* rest = nullptr;
    const long v = std::strtol(item.c_str(), &rest, 10);
    if (rest == item.c_str() || *rest != '\0' || v < 0 || v > 1'000'000)
      check(Status::Error("--devices: '" + item + "' is neither a device index nor a device name of this trace"));
    out.insert(static_cast<std::int32_t>(v));
  }
  return out;
}

void export_chrome(const TraceArgs& a) {
  auto reader = open_trace(a.file);
  telemetry::ChromeExportOptions options;
  const std::int64_t t0 = reader->start_ns();
  if (a.from_s) options.from_ns = t0 + static_cast<std::int64_t>(std::llround(*a.from_s * 1e9));
  if (a.to_s) options.to_ns = t0 + static_cast<std::int64_t>(std::llround(*a.to_s * 1e9));
  if (!a.devices.empty()) options.devices = parse_devices(a.devices, reader->device_names());
  check(telemetry::export_chrome_trace(*reader, a.out, options));
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(a.out, ec);
  std::printf("wrote %s (%llu bytes): open it at https://ui.perfetto.dev or chrome://tracing\n",
              a.out.string().c_str(), static_cast<unsigned long long>(ec ? 0 : bytes));
}

void compare(const TraceArgs& a) {
  auto ra = open_trace(a.file);
  auto rb = open_trace(a.other);
  auto pa = telemetry::profile_trace(*ra, a.file.filename().string());
  check(pa.status());
  auto pb = telemetry::profile_trace(*rb, a.other.filename().string());
  check(pb.status());
  std::printf("%s", telemetry::format_comparison(*pa, *pb).c_str());
}

void export_spans(const TraceArgs& a) {
  auto reader = open_trace(a.file);
  check(telemetry::export_row_trace(*reader, a.out));
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(a.out, ec);
  std::printf("wrote %s (%llu bytes): schema 1, a row per span in SPANS, for sqlite3 and ad-hoc SQL\n",
              a.out.string().c_str(), static_cast<unsigned long long>(ec ? 0 : bytes));
}

}  // namespace

void register_trace(CLI::App& app) {
  auto args = std::make_shared<TraceArgs>();
  CLI::App* trace = app.add_subcommand("trace", "Inspect a recorded trace (SQLite, from record_start)");
  trace->require_subcommand(1);

  CLI::App* sum = trace->add_subcommand(
      "summarize", "Per-device busy/stall by reason, throughput, latency percentiles, most skewed experts");
  sum->add_option("FILE", args->file, "Trace database (.db)")->required();
  sum->add_option("--top", args->top, "How many of the most skewed experts to list")->capture_default_str()
      ->check(CLI::Range(0, 10000));
  sum->callback([args] { summarize(*args); });

  CLI::App* cmp = trace->add_subcommand(
      "compare", "Per-device difference of two runs: throughput, busy and stall shares by reason, queued tokens");
  cmp->add_option("A", args->file, "Trace database of run A (.db)")->required();
  cmp->add_option("B", args->other, "Trace database of run B (.db)")->required();
  cmp->callback([args] { compare(*args); });

  CLI::App* chrome = trace->add_subcommand("export-chrome", "Write Chrome trace-event JSON that Perfetto opens");
  chrome->add_option("FILE", args->file, "Trace database (.db)")->required();
  chrome->add_option("OUT", args->out, "JSON file to write")->required();
  chrome->add_option("--from", args->from_s, "Start of the range, seconds after the trace's start")
      ->check(non_negative_number());
  chrome->add_option("--to", args->to_s, "End of the range, seconds after the trace's start")
      ->check(non_negative_number());
  chrome->add_option("--devices", args->devices, "Devices to export: indices or names, comma-separated (e.g. 0,3,e1)");
  chrome->callback([args] { export_chrome(*args); });

  CLI::App* rows = trace->add_subcommand(
      "export-spans", "Write a copy with a plain row per span (schema 1: SPANS, QUEUE_SAMPLES) for ad-hoc SQL");
  rows->add_option("FILE", args->file, "Trace database (.db)")->required();
  rows->add_option("OUT", args->out, "Database to create")->required();
  rows->callback([args] { export_spans(*args); });
}

}  // namespace sy::cli
