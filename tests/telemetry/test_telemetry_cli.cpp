// `switchyard trace …` and `switchyard keys`, run as a user would.
#include <sys/stat.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "telemetry/curve_keys.h"
#include "telemetry/curve_server.h"
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

  r = run("trace summarize " + (tmp / "missing.db").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("switchyard trace: error: " + (tmp / "missing.db").string() + ": no such file"),
            std::string::npos)
      << r.output;
  r = run("trace");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace sy::telemetry
