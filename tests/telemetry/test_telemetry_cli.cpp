// `switchyard trace …` and `switchyard keys`, run as a user would.
#include <sys/stat.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "telemetry/curve_keys.h"
#include "telemetry/curve_server.h"
#include "telemetry/trace_reader.h"
#include "telemetry/trace_recorder.h"
#include "tests/telemetry/test_support.h"

namespace sy::telemetry {
namespace {

using testing::TempDir;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result run(const std::string& args) {
  Result r;
  FILE* p = ::popen((std::string(SY_SWITCHYARD_BIN) + " " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) r.output += buf;
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(KeysCommand, WritesAKeyDirectoryTheLibraryLoads) {
  TempDir tmp;
  const auto dir = tmp / "keys";
  Result r = run("keys --out " + dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("server.key"), std::string::npos) << r.output;
  struct stat st {};
  ASSERT_EQ(::stat((dir / "server.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir / "client.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  auto config = load_curve_server_config(dir);
  ASSERT_TRUE(config.ok()) << config.status().message();
  auto client = load_client_keys(dir);
  ASSERT_TRUE(client.ok()) << client.status().message();
  EXPECT_EQ(config->authorized_clients, std::vector<std::string>{client->client.public_key});
  EXPECT_EQ(config->server.public_key, client->server_public_key);

  // Again: refused, the keys stay; a second client is added beside the first under the same server key.
  r = run("keys --out " + dir.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("switchyard keys: error: " + (dir / "client.key").string() + " exists"), std::string::npos)
      << r.output;
  r = run("keys --out " + dir.string() + " --client console-2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto again = load_curve_server_config(dir);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->server.public_key, config->server.public_key);
  EXPECT_EQ(again->authorized_clients.size(), 2u);
  EXPECT_TRUE(load_client_keys(dir, "console-2").ok());

  r = run("keys --out " + dir.string() + " --client ../evil");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--client '../evil'"), std::string::npos) << r.output;
}

TEST(TraceCommand, SummarizesAndExportsARecording) {
  TempDir tmp;
  RecorderOptions options;
  options.path = tmp / "run.db";
  options.device_names = {"a0"};
  auto recorder = TraceRecorder::open(options);
  ASSERT_TRUE(recorder.ok());
  Span s;
  s.start_ns = 0;
  s.end_ns = 500'000'000;
  s.tokens = 4;
  Span stall = s;
  stall.start_ns = s.end_ns;
  stall.end_ns = 1'000'000'000;
  stall.kind = SpanKind::Stall;
  stall.stall_reason = StallReason::QueueEmpty;
  const std::vector<Span> spans = {s, stall};
  (*recorder)->add(spans);
  ASSERT_TRUE((*recorder)->stop().ok());

  Result r = run("trace summarize " + options.path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("trace " + options.path.string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  a0             50.0%        50.0%"), std::string::npos) << r.output;

  const auto out = tmp / "run.json";
  r = run("trace export-chrome " + options.path.string() + " " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + out.string()), std::string::npos) << r.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object());
  EXPECT_TRUE(doc["traceEvents"].is_array());

  // A plain row per span for ad-hoc SQL, read back by the same tools.
  const auto rows = tmp / "rows.db";
  r = run("trace export-spans " + options.path.string() + " " + rows.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto rows_reader = TraceReader::open(rows);
  ASSERT_TRUE(rows_reader.ok()) << rows_reader.status().message();
  EXPECT_EQ((*rows_reader)->schema_version(), 1);
  auto rows_spans = (*rows_reader)->spans();
  ASSERT_TRUE(rows_spans.ok());
  ASSERT_EQ(rows_spans->size(), 2u);
  EXPECT_EQ(std::memcmp(&rows_spans->at(1), &stall, sizeof(Span)), 0);
  r = run("trace summarize " + rows.string());
  EXPECT_NE(r.output.find("  a0             50.0%        50.0%"), std::string::npos) << r.output;
  r = run("trace export-spans " + options.path.string() + " " + rows.string());
  EXPECT_EQ(r.exit_code, 1) << "an existing file is never replaced: " << r.output;

  r = run("trace summarize " + (tmp / "missing.db").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("switchyard trace: error: " + (tmp / "missing.db").string() + ": no such file"),
            std::string::npos)
      << r.output;
  r = run("trace");
  EXPECT_NE(r.exit_code, 0);
}

// --from/--to/--devices: only the spans of those devices overlapping that range (a transfer
// also on its destination's receive lane when that device is selected).
TEST(TraceCommand, ExportsATimeRangeAndASetOfDevices) {
  TempDir tmp;
  RecorderOptions options;
  options.path = tmp / "run.db";
  options.device_names = {"a0", "e0", "e1"};
  auto recorder = TraceRecorder::open(options);
  ASSERT_TRUE(recorder.ok());
  std::vector<Span> spans;
  for (std::int32_t d = 0; d < 3; ++d) {
    for (std::int64_t k = 0; k < 10; ++k) {  // one span a second on each device
      Span s;
      s.device = d;
      s.start_ns = k * 1'000'000'000;
      s.end_ns = s.start_ns + 600'000'000;
      s.kind = SpanKind::Expert;
      s.tokens = k;
      spans.push_back(s);
    }
  }
  Span transfer;  // a0 → e1 at 4.7 s
  transfer.device = 0;
  transfer.peer = 2;
  transfer.lane = Lane::Send;
  transfer.kind = SpanKind::Transfer;
  transfer.start_ns = 4'700'000'000;
  transfer.end_ns = 4'800'000'000;
  spans.push_back(transfer);
  (*recorder)->add(spans);
  ASSERT_TRUE((*recorder)->stop().ok());

  const auto out = tmp / "part.json";
  Result r = run("trace export-chrome " + options.path.string() + " " + out.string() +
                 " --from 2.5 --to 5.2 --devices 1,e1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object());
  std::multiset<std::pair<std::int64_t, std::string>> got;  // (pid, name@ts)
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    got.insert({e["pid"].get<std::int64_t>(), e["name"].get<std::string>() + "@" + std::to_string(std::llround(e["ts"].get<double>()))});
  }
  // Devices 1 and 2 (pids 2 and 3): spans starting at 2 s (reaching 2.6 s), 3, 4 and 5 s; the
  // transfer on e1's receive lane; nothing of a0.
  const std::multiset<std::pair<std::int64_t, std::string>> expected = {
      {2, "expert@2000000"}, {2, "expert@3000000"}, {2, "expert@4000000"}, {2, "expert@5000000"},
      {3, "expert@2000000"}, {3, "expert@3000000"}, {3, "expert@4000000"}, {3, "expert@5000000"},
      {3, "transfer@4700000"}};
  EXPECT_EQ(got, expected);

  r = run("trace export-chrome " + options.path.string() + " " + out.string() + " --devices e9");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--devices: 'e9' is neither a device index nor a device name"), std::string::npos) << r.output;
}

// `trace compare A B`: a row per device with both runs' throughput, busy and stall shares and
// queued tokens; a device of one run only is named as such; a missing file is an error naming it.
TEST(TraceCommand, ComparesTwoRunsPerDevice) {
  TempDir tmp;
  auto record = [&](const std::filesystem::path& path, int devices, std::int64_t work_ms, bool windows) {
    RecorderOptions options;
    options.path = path;
    options.span_windows = windows;
    options.device_names = {"a0", "e0", "e1"};
    auto recorder = TraceRecorder::open(options);
    ASSERT_TRUE(recorder.ok());
    std::vector<Span> spans;
    for (std::int32_t d = 0; d < devices; ++d) {
      for (std::int64_t k = 0; k < 10; ++k) {  // per second: work_ms of 16 rows, then a barrier stall
        Span s;
        s.device = d;
        s.start_ns = k * 1'000'000'000;
        s.end_ns = s.start_ns + work_ms * 1'000'000;
        s.kind = SpanKind::Expert;
        s.tokens = 16;
        spans.push_back(s);
        s.start_ns = s.end_ns;
        s.end_ns = (k + 1) * 1'000'000'000;
        s.kind = SpanKind::Stall;
        s.stall_reason = StallReason::Barrier;
        s.tokens = 0;
        spans.push_back(s);
      }
    }
    (*recorder)->add(spans);
    ASSERT_TRUE((*recorder)->stop().ok());
  };
  record(tmp / "a.db", 2, 400, true);
  record(tmp / "b.db", 3, 600, false);  // made before the overview: profiled from its spans
  Result r = run("trace compare " + (tmp / "a.db").string() + " " + (tmp / "b.db").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("windows computed from spans"), std::string::npos) << r.output;
  auto row = [&](const std::string& name) {
    const auto at = r.output.find("\n" + name);
    return at == std::string::npos ? std::string() : r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
  };
  const std::string a0 = row("a0");
  EXPECT_NE(a0.find("16"), std::string::npos) << r.output;      // 16 rows/s in both
  EXPECT_NE(a0.find("40.0%"), std::string::npos) << r.output;   // busy A
  EXPECT_NE(a0.find("60.0%"), std::string::npos) << r.output;   // busy B
  EXPECT_NE(a0.find("+20.0"), std::string::npos) << r.output;   // points
  EXPECT_NE(a0.find("barrier -20.0"), std::string::npos) << r.output;
  EXPECT_NE(row("e1 (B only)"), "") << r.output;

  r = run("trace compare " + (tmp / "a.db").string() + " " + (tmp / "missing.db").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing.db: no such file"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace sy::telemetry
