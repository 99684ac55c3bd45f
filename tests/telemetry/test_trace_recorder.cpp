#include "telemetry/trace_recorder.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "telemetry/trace_reader.h"
#include "tests/telemetry/test_support.h"

namespace sy::telemetry {
namespace {

using testing::TempDir;

std::unique_ptr<TraceRecorder> open_recorder(RecorderOptions options) {
  auto r = TraceRecorder::open(std::move(options));
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::unique_ptr<TraceReader> open_reader(const std::filesystem::path& path) {
  auto r = TraceReader::open(path);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? std::move(r).value() : nullptr;
}

// Runs one SQL statement on a read-only connection and returns the first column of each row.
std::vector<std::string> sql(const std::filesystem::path& path, const std::string& query) {
  sqlite3* db = nullptr;
  std::vector<std::string> out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, query.c_str(), -1, &st, nullptr) == SQLITE_OK) {
      while (sqlite3_step(st) == SQLITE_ROW) {
        const auto* t = sqlite3_column_text(st, 0);
        out.emplace_back(t ? reinterpret_cast<const char*>(t) : "NULL");
      }
    } else {
      out.push_back(std::string("error: ") + sqlite3_errmsg(db));
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return out;
}

Span span(std::int64_t start, std::int64_t end, std::int32_t device, SpanKind kind,
          StallReason reason = StallReason::None) {
  Span s;
  s.start_ns = start;
  s.end_ns = end;
  s.device = device;
  s.kind = kind;
  s.stall_reason = reason;
  s.block = kind == SpanKind::Stall ? -1 : 3;
  s.index = 2;
  s.microbatch = 1;
  s.peer = kind == SpanKind::Transfer ? 5 : -1;
  s.lane = kind == SpanKind::Transfer ? Lane::Send : Lane::Compute;
  s.tokens = kind == SpanKind::Stall ? 0 : 16;
  return s;
}

// Schema 2 (blocks) and schema 1 (rows) hold the same records.
class TraceFormats : public ::testing::TestWithParam<TraceFormat> {};
INSTANTIATE_TEST_SUITE_P(BothSchemas, TraceFormats, ::testing::Values(TraceFormat::Blocks, TraceFormat::Rows),
                         [](const auto& p) { return p.param == TraceFormat::Blocks ? "Blocks" : "Rows"; });

// The number of spans committed, whichever the schema.
std::string committed_spans(const std::filesystem::path& path, TraceFormat format) {
  const auto rows = sql(path, format == TraceFormat::Blocks ? "SELECT COALESCE(SUM(count), 0) FROM SPAN_BLOCKS"
                                                            : "SELECT COUNT(*) FROM SPANS");
  return rows.size() == 1 ? rows[0] : "no answer";
}

TEST_P(TraceFormats, RoundTripsEveryEventKind) {
  const bool blocks = GetParam() == TraceFormat::Blocks;
  TempDir dir;
  RecorderOptions options;
  options.path = dir / "run.db";
  options.format = GetParam();
  options.metadata = {{"clock", "virtual"}, {"model", R"({"name":"mixtral-8x7b","experts":8})"}};
  options.device_names = {"a0", "e0"};
  auto recorder = open_recorder(options);
  ASSERT_TRUE(recorder);

  const std::vector<Span> spans = {span(100, 200, 0, SpanKind::Attention), span(150, 400, 1, SpanKind::Expert),
                                   span(200, 260, 0, SpanKind::Stall, StallReason::Barrier),
                                   span(300, 350, 1, SpanKind::Transfer)};
  QueueSample q;
  q.t_ns = 120;
  q.device = 1;
  q.layer = LayerKind::Expert;
  q.block = 3;
  q.index = 2;
  q.depth_tokens = 40;
  q.oldest_age_ns = 777;
  ExpertLoad l;
  l.window_start_ns = 0;
  l.window_end_ns = 1000;
  l.block = 3;
  l.expert = 2;
  l.device = 1;
  l.tokens = 55;
  RequestEvent r;
  r.t_ns = 90;
  r.request_id = 42;
  r.phase = RequestPhase::Admitted;
  r.tokens_in = 30;
  r.rank = 0;
  EXPECT_TRUE(recorder->add(spans));
  EXPECT_TRUE(recorder->add(std::span(&q, 1)));
  EXPECT_TRUE(recorder->add(std::span(&l, 1)));
  EXPECT_TRUE(recorder->add(std::span(&r, 1)));
  EXPECT_TRUE(recorder->add_json(Topic::Control, R"({"t_ns":500,"cmd":"pause","ok":true})"));
  EXPECT_TRUE(recorder->add_json(Topic::Summary, R"({"t_begin_ns":0,"t_end_ns":1000,"tokens_per_s":3.5})"));
  EXPECT_FALSE(recorder->add_json(Topic::Meta, "{}"));
  ASSERT_TRUE(recorder->flush().ok());
  // Row indexes wait for stop(); the data is readable before.
  EXPECT_EQ(sql(options.path, "SELECT COUNT(*) FROM sqlite_master WHERE type='index' AND name LIKE 'SPANS_%'"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(committed_spans(options.path, GetParam()), "4");
  if (blocks) {  // one block per device
    EXPECT_EQ(sql(options.path, "SELECT device || ':' || count FROM SPAN_BLOCKS ORDER BY device"),
              (std::vector<std::string>{"0:2", "1:2"}));
    EXPECT_EQ(sql(options.path, "SELECT count(*) FROM sqlite_master WHERE name IN ('SPANS', 'QUEUE_SAMPLES')"),
              std::vector<std::string>{"0"});
  }
  ASSERT_TRUE(recorder->stop().ok());
  EXPECT_TRUE(recorder->stop().ok());  // idempotent
  EXPECT_EQ(recorder->stats().records_written, 9u);
  EXPECT_EQ(recorder->stats().records_dropped, 0u);

  auto reader = open_reader(options.path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->schema_version(), blocks ? 2 : 1);
  const auto meta = reader->metadata();
  EXPECT_EQ(meta.at("schema_version"), blocks ? "2" : "1");
  if (blocks) {
    EXPECT_EQ(meta.at("block_codec"), "zstd");
  }
  EXPECT_EQ(meta.at("clock"), "virtual");
  EXPECT_EQ(meta.at("complete"), "1");
  EXPECT_EQ(meta.at("records_written"), "9");
  EXPECT_GT(std::stoll(meta.at("started_unix_ns")), 0);
  EXPECT_EQ(reader->device_names(), (std::vector<std::string>{"a0", "e0"}));
  EXPECT_EQ(reader->start_ns(), 0);
  EXPECT_EQ(reader->end_ns(), 1000);

  auto got = reader->spans();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(std::memcmp(&(*got)[i], &spans[i], sizeof(Span)), 0) << i;
  // Overlap query: spans touching [210, 290].
  auto window = reader->spans(210, 290);
  ASSERT_TRUE(window.ok());
  EXPECT_EQ(window->size(), 2u);

  // The overview: one window per device's lane, adding up the spans above.
  EXPECT_EQ(reader->has_span_windows(), blocks);
  if (blocks) {
    auto windows = reader->span_windows();
    ASSERT_TRUE(windows.ok()) << windows.status().message();
    ASSERT_EQ(windows->size(), 3u);  // device 0 compute, device 1 compute, device 1 send
    const SpanWindow& d0 = (*windows)[0];
    EXPECT_EQ(d0.device, 0);
    EXPECT_EQ(d0.spans, 2);
    EXPECT_EQ(d0.busy_ns(), 100);
    EXPECT_EQ(d0.stall_ns[static_cast<std::size_t>(StallReason::Barrier)], 60);
    EXPECT_EQ((*windows)[1].kind_ns[static_cast<std::size_t>(SpanKind::Expert)], 250);
    EXPECT_EQ((*windows)[2].lane, Lane::Send);
    EXPECT_EQ(reader->span_count(), 4);
  }

  auto qs = reader->queue_samples();
  ASSERT_TRUE(qs.ok() && qs->size() == 1u);
  EXPECT_EQ(std::memcmp(&qs->at(0), &q, sizeof q), 0);
  auto ls = reader->expert_load();
  ASSERT_TRUE(ls.ok() && ls->size() == 1u);
  EXPECT_EQ(std::memcmp(&ls->at(0), &l, sizeof l), 0);
  auto rs = reader->requests();
  ASSERT_TRUE(rs.ok() && rs->size() == 1u);
  EXPECT_EQ(std::memcmp(&rs->at(0), &r, sizeof r), 0);
  EXPECT_TRUE(reader->requests(91, 1000)->empty());
  auto control = reader->control_events();
  ASSERT_TRUE(control.ok() && control->size() == 1u);
  EXPECT_EQ(nlohmann::json::parse(control->at(0))["cmd"], "pause");
  auto summaries = reader->summaries();
  ASSERT_TRUE(summaries.ok() && summaries->size() == 1u);

  // The nsys-style columns: names through StringIds, indexes built, a single file again.
  if (!blocks) {
    EXPECT_EQ(sql(options.path,
                  "SELECT s.value FROM SPANS JOIN StringIds s ON s.id = SPANS.stallReasonId WHERE stallReasonId IS NOT NULL"),
              std::vector<std::string>{"barrier"});
  }
  EXPECT_EQ(sql(options.path, "SELECT s.value FROM CONTROL_EVENTS JOIN StringIds s ON s.id = commandId"),
            std::vector<std::string>{"pause"});
  const auto indexes = sql(options.path, "SELECT name FROM sqlite_master WHERE type='index' AND name NOT LIKE 'sqlite_%'");
  const std::set<std::string> index_set(indexes.begin(), indexes.end());
  for (const char* name : {"EXPERT_LOAD_start", "REQUEST_EVENTS_timestamp", "CONTROL_EVENTS_timestamp",
                           "SUMMARIES_start"}) {
    EXPECT_EQ(index_set.count(name), 1u) << name;
  }
  const std::vector<const char*> per_format =
      blocks ? std::vector<const char*>{"SPAN_BLOCKS_start", "SPAN_BLOCKS_device_start", "QUEUE_BLOCKS_start"}
             : std::vector<const char*>{"SPANS_start", "SPANS_device_start", "QUEUE_SAMPLES_timestamp",
                                        "QUEUE_SAMPLES_device_timestamp"};
  for (const char* name : per_format) EXPECT_EQ(index_set.count(name), 1u) << name;
  EXPECT_EQ(sql(options.path, "PRAGMA journal_mode"), std::vector<std::string>{"delete"});
  EXPECT_FALSE(std::filesystem::exists(dir / "run.db-wal"));
  EXPECT_EQ(sql(options.path, "PRAGMA integrity_check"), std::vector<std::string>{"ok"});
}

TEST(TraceRecorder, DeviceNamesMayComeFromTheMetaDevicesArray) {
  TempDir dir;
  RecorderOptions options;
  options.path = dir / "run.db";
  options.metadata["devices"] = R"([{"index":0,"name":"a0","rank":0},{"index":2,"name":"e1"}])";
  auto recorder = open_recorder(options);
  ASSERT_TRUE(recorder && recorder->stop().ok());
  auto reader = open_reader(options.path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->device_names(), (std::vector<std::string>{"a0", "device1", "e1"}));
}

TEST(TraceRecorder, FilesAreNeverSilentlyReplaced) {
  TempDir dir;
  RecorderOptions options;
  options.path = dir / "run.db";
  std::ofstream(options.path) << "precious";
  auto refused = TraceRecorder::open(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("run.db: file exists"), std::string::npos);
  EXPECT_EQ(std::filesystem::file_size(options.path), 8u);
  options.overwrite = true;
  auto replaced = open_recorder(options);
  ASSERT_TRUE(replaced && replaced->stop().ok());
  EXPECT_TRUE(TraceReader::open(options.path).ok());

  options.path = dir / "no" / "such" / "dir.db";
  auto missing = TraceRecorder::open(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);
}

TEST(TraceRecorder, ABatchBeyondTheQueueBoundIsDroppedAndCounted) {
  TempDir dir;
  RecorderOptions options;
  options.path = dir / "run.db";
  options.max_queued_records = 100;
  auto recorder = open_recorder(options);
  ASSERT_TRUE(recorder);
  std::vector<Span> many(101);
  EXPECT_FALSE(recorder->add(many));
  many.resize(100);
  EXPECT_TRUE(recorder->add(many));
  ASSERT_TRUE(recorder->stop().ok());
  EXPECT_EQ(recorder->stats().records_dropped, 101u);
  EXPECT_EQ(recorder->stats().records_written, 100u);
  EXPECT_FALSE(recorder->add(many));  // after stop
}

// --record-max: the file stops growing at its cap, stays a valid recording and says so.
TEST_P(TraceFormats, ASizeCapStopsTheFileGrowingAndIsMarked) {
  TempDir dir;
  RecorderOptions options;
  options.path = dir / "capped.db";
  options.format = GetParam();
  options.max_bytes = 256 * 1024;
  auto recorder = open_recorder(options);
  ASSERT_TRUE(recorder);
  // Random durations and token counts: blocks compress them only so far.
  std::mt19937_64 rng(7);
  std::vector<Span> batch(2000);
  for (int i = 0; i < 50; ++i) {
    for (std::size_t k = 0; k < batch.size(); ++k) {
      const auto t = static_cast<std::int64_t>(i * 2000 + k) * 1000;
      batch[k] = span(t, t + static_cast<std::int64_t>(rng() % 100000), static_cast<std::int32_t>(rng() % 8), SpanKind::Expert);
      batch[k].tokens = static_cast<std::int64_t>(rng() % 4096);
      batch[k].index = static_cast<std::int32_t>(rng() % 64);
    }
    ASSERT_TRUE(recorder->add(batch));
    ASSERT_TRUE(recorder->flush().ok());
  }
  ASSERT_TRUE(recorder->stop().ok()) << "a capped recording is not an error";
  const RecorderStats stats = recorder->stats();
  EXPECT_TRUE(stats.size_capped);
  EXPECT_GT(stats.records_dropped, 0u);
  EXPECT_GT(stats.records_written, 0u);
  EXPECT_LT(stats.records_written, 100'000u);
  // The cap is checked after each transaction: the file ends at most one batch past it.
  EXPECT_LT(std::filesystem::file_size(options.path), options.max_bytes + 512 * 1024);
  auto reader = TraceReader::open(options.path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  EXPECT_EQ((*reader)->metadata().at("size_capped"), "1");
}

TEST(TraceReader, ErrorsNameTheFileAndTheProblem) {
  TempDir dir;
  auto missing = TraceReader::open(dir / "none.db");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), (dir / "none.db").string() + ": no such file");

  std::ofstream(dir / "text.db") << std::string(2000, 'x');
  auto text = TraceReader::open(dir / "text.db");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("not an SQLite database"), std::string::npos) << text.status().message();

  auto make_db = [&](const std::string& name, const std::string& statements) {
    sqlite3* db = nullptr;
    sqlite3_open((dir / name).c_str(), &db);
    sqlite3_exec(db, statements.c_str(), nullptr, nullptr, nullptr);
    sqlite3_close(db);
    return TraceReader::open(dir / name);
  };
  auto foreign = make_db("foreign.db", "CREATE TABLE t(x)");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("not a Switchyard trace"), std::string::npos);
  auto newer = make_db("newer.db", "PRAGMA application_id=1398363218; PRAGMA user_version=3; CREATE TABLE t(x)");
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find("trace schema version 3 is newer than this reader's (2)"),
            std::string::npos);
}

// A child records continuously and is killed mid-write; what it leaves must open, check and
// read to its last commit.
TEST_P(TraceFormats, SurvivesSigkillOfTheWriter) {
  TempDir dir;
  const std::filesystem::path path = dir / "killed.db";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RecorderOptions options;
    options.path = path;
    options.metadata = {{"clock", "wall"}};
    options.format = GetParam();
    options.block_records = 5000;  // whole batches per block: what is committed is whole batches
    auto recorder = TraceRecorder::open(options);
    if (!recorder.ok()) ::_exit(3);
    std::vector<Span> batch(500);
    QueueSample q;
    for (std::int64_t t = 0;; ++t) {
      for (auto& s : batch) s.start_ns = s.end_ns = t;
      q.t_ns = t;
      (*recorder)->add(batch);
      (*recorder)->add(std::span(&q, 1));
      (*recorder)->add_json(Topic::Summary, "{\"t_begin_ns\":" + std::to_string(t) + "}");
      if (t % 4 == 0) (void)(*recorder)->flush();
    }
  }
  // Let it write a good many transactions, then kill it without warning.
  const bool wrote = testing::eventually([&] {
    const std::string n = committed_spans(path, GetParam());
    return !n.empty() && std::isdigit(static_cast<unsigned char>(n[0])) && std::stoll(n) >= 20000;
  });
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(wrote);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(WTERMSIG(status), SIGKILL);

  auto reader = open_reader(path);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->metadata().at("complete"), "0");
  auto spans = reader->spans();
  ASSERT_TRUE(spans.ok()) << spans.status().message();
  EXPECT_GE(spans->size(), 20000u);
  EXPECT_EQ(spans->size() % 500, 0u);  // whole transactions only
  if (GetParam() == TraceFormat::Blocks) {
    // The overview rows committed so far read too, and count no span that was not committed.
    ASSERT_TRUE(reader->has_span_windows());
    auto windows = reader->span_windows();
    ASSERT_TRUE(windows.ok()) << windows.status().message();
    std::int64_t counted = 0;
    for (const auto& w : *windows) counted += w.spans;
    EXPECT_GT(counted, 0);
    EXPECT_LE(counted, static_cast<std::int64_t>(spans->size()));
    EXPECT_EQ(reader->span_count(), static_cast<std::int64_t>(spans->size()));
  }
  EXPECT_EQ(sql(path, "PRAGMA integrity_check"), std::vector<std::string>{"ok"});

  // And with the sqlite3 command-line shell, the way an operator would look.
  if (std::system("command -v sqlite3 >/dev/null 2>&1") == 0) {
    const std::string cmd = "sqlite3 '" + path.string() + "' 'PRAGMA integrity_check; SELECT COUNT(*) > 0 FROM " +
                            (GetParam() == TraceFormat::Blocks ? "SPAN_BLOCKS" : "SPANS") + ";'";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[256] = {};
    std::string out;
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    EXPECT_EQ(::pclose(p), 0);
    EXPECT_EQ(out, "ok\n1\n");
  }
}

}  // namespace
}  // namespace sy::telemetry
