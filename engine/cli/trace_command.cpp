// `switchyard trace summarize|export-chrome`: reads a recorded SQLite trace (docs/trace-schema.md)
// and prints its summary, or converts it into Chrome trace-event JSON for Perfetto.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "telemetry/chrome_trace_export.h"
#include "telemetry/trace_reader.h"
#include "telemetry/trace_summary.h"

namespace sy::cli {
namespace {

struct TraceArgs {
  std::filesystem::path file;
  std::filesystem::path out;
  int top = 5;
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

void export_chrome(const TraceArgs& a) {
  auto reader = open_trace(a.file);
  check(telemetry::export_chrome_trace(*reader, a.out));
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(a.out, ec);
  std::printf("wrote %s (%llu bytes): open it at https://ui.perfetto.dev or chrome://tracing\n",
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

  CLI::App* chrome = trace->add_subcommand("export-chrome", "Write Chrome trace-event JSON that Perfetto opens");
  chrome->add_option("FILE", args->file, "Trace database (.db)")->required();
  chrome->add_option("OUT", args->out, "JSON file to write")->required();
  chrome->callback([args] { export_chrome(*args); });
}

}  // namespace sy::cli
