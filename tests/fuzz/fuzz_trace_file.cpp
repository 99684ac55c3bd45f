// Fuzzes a whole recorded trace as a file someone hands the console or `switchyard trace`
// (docs/trace-schema.md): the input is a SQLite database image. It is opened and read as those
// tools read it: metadata, devices, every event table, the window aggregates, a summary, a
// profile and a Chrome export. Any file opens or gives a named error; an open trace's reads
// give records or named errors; nothing allocates beyond what its bytes back (libFuzzer's
// memory limit) and no arithmetic on its values is undefined (UBSan).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "telemetry/chrome_trace_export.h"
#include "telemetry/trace_compare.h"
#include "telemetry/trace_reader.h"
#include "telemetry/trace_summary.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sy::telemetry;

template <class T>
void named(const sy::StatusOr<T>& r, const char* what) {
  if (!r.ok() && r.status().message().empty()) fuzz_fail("trace_file", (std::string(what) + ": an error without a message").c_str());
}

// The file each input is written to, removed (with SQLite's side files) when the process ends.
struct Scratch {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("sy_fuzz_trace_file_" + std::to_string(::getpid()) + ".db");
  ~Scratch() {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path.string() + suffix, ec);
  }
};

const std::filesystem::path& scratch() {
  static const Scratch s;
  return s.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path& path = scratch();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  // A hot journal or WAL beside the file would be replayed into the next input's database.
  std::error_code ec;
  std::filesystem::remove(path.string() + "-wal", ec);
  std::filesystem::remove(path.string() + "-journal", ec);
  auto opened = TraceReader::open(path);
  named(opened, "open");
  if (!opened.ok()) return 0;
  const TraceReader& t = **opened;
  (void)t.metadata();
  (void)t.device_names();
  (void)t.start_ns();
  (void)t.end_ns();
  (void)t.span_count();
  named(t.spans(), "spans");
  named(t.queue_samples(), "queue samples");
  named(t.expert_load(), "expert load");
  named(t.requests(), "requests");
  named(t.span_windows(), "span windows");
  named(t.control_events(), "control events");
  named(t.summaries(), "summaries");
  const auto summary = summarize_trace(t);
  named(summary, "summary");
  if (summary.ok()) (void)format_trace_summary(*summary);
  named(profile_trace(t, "fuzz"), "profile");
  std::ostringstream chrome;
  if (const sy::Status s = write_chrome_trace(t, chrome); !s.ok() && s.message().empty())
    fuzz_fail("trace_file", "chrome export: an error without a message");
  return 0;
}
