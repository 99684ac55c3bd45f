// Post-mortem: a trace recorded by the telemetry library opens into the console's model with
// every view's data, and exports as an SQLite copy.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <fstream>
#include <unistd.h>

#include "console/model/console_model.h"
#include "console/model/span_folding.h"
#include "console/model/run_comparison.h"
#include "console/model/trace_copy.h"
#include "console/model/trace_detail.h"
#include "console/model/trace_loader.h"
#include "synthetic_trace.h"
#include "telemetry/trace_reader.h"

namespace sy::console {
namespace {

namespace fs = std::filesystem;

class TraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("console_trace_" + std::to_string(getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto counts = testing::write_synthetic_trace(dir_ / "run.db", 3);
    ASSERT_TRUE(counts.ok()) << counts.status().message();
    counts_ = *counts;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  testing::SyntheticTraceCounts counts_;
};

TEST_F(TraceTest, LoadsEveryTableIntoTheModel) {
  auto reader = telemetry::TraceReader::open(dir_ / "run.db");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  ConsoleModel model;
  ASSERT_TRUE(load_trace(**reader, model).ok());

  EXPECT_FALSE(model.bounded());
  EXPECT_EQ(model.spans().size(), counts_.spans + counts_.transfers);
  EXPECT_EQ(model.spans().rejected(), 0u);
  EXPECT_EQ(model.device_count(), 8);
  EXPECT_EQ(model.queues().queue_count(), 64u);  // 8 devices x 8 blocks
  std::size_t samples = 0;
  for (const QueueKey& k : model.queues().keys()) samples += model.queues().series(k)->size();
  EXPECT_EQ(samples, counts_.queue_samples);  // nothing lost to ring-buffer capacity
  EXPECT_EQ(model.loads().window_count(), 3u);
  EXPECT_EQ(model.requests().size(), 180u);
  EXPECT_EQ(model.summaries().points().size(), counts_.summaries);
  ASSERT_EQ(model.control_events().size(), 1u);
  EXPECT_EQ(model.control_events()[0].label(), "set_policy: async/defrag -> async/mtfs");
  EXPECT_EQ(model.bad_messages(), 0u) << model.last_error();

  ASSERT_TRUE(model.meta().has_value());
  const RunMeta& meta = *model.meta();
  EXPECT_EQ(meta.model_name, "synthetic-moe");
  EXPECT_EQ(meta.blocks, 8);
  EXPECT_EQ(meta.run_id, 77u);
  EXPECT_EQ(meta.policy.describe(), "async/defrag (lookahead 3, decay 0.5)");
  ASSERT_EQ(meta.devices.size(), 8u);
  EXPECT_EQ(meta.device_name(5), "e1");
  ASSERT_EQ(meta.placement.size(), 8u);
  EXPECT_EQ(meta.placement[2][5], (std::vector<std::int32_t>{5}));
  EXPECT_GE(model.end_ns(), counts_.end_ns);

  // The views' queries over the loaded data: every span of a lane is represented once.
  const auto& lane = model.spans().lane(4, telemetry::Lane::Compute);
  std::vector<TimelineItem> items;
  fold_lane(lane, model.begin_ns(), model.end_ns(), {.ns_per_pixel = 2e6, .min_width_px = 3}, items);
  std::size_t n = 0;
  for (const auto& i : items) n += i.count;
  EXPECT_EQ(n, lane.size());
  EXPECT_LT(items.size(), 1000u);
}

TEST_F(TraceTest, SqliteCopyOpensAsTheSameTrace) {
  ASSERT_TRUE(copy_trace_database(dir_ / "run.db", dir_ / "copy.db").ok());
  EXPECT_FALSE(fs::exists(dir_ / "copy.db.partial"));
  auto reader = telemetry::TraceReader::open(dir_ / "copy.db");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto spans = (*reader)->spans();
  ASSERT_TRUE(spans.ok());
  EXPECT_EQ(spans->size(), counts_.spans);
  // Replacing an existing file works too.
  ASSERT_TRUE(copy_trace_database(dir_ / "run.db", dir_ / "copy.db").ok());
}

TEST_F(TraceTest, CopyErrorsNameTheProblem) {
  auto missing = copy_trace_database(dir_ / "nope.db", dir_ / "out.db");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("nope.db"), std::string::npos);
  std::ofstream(dir_ / "text.db") << "this is not a database, just text that is long enough to have a header";
  auto garbage = copy_trace_database(dir_ / "text.db", dir_ / "out.db");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.message().find("text.db"), std::string::npos) << garbage.message();
  auto no_dir = copy_trace_database(dir_ / "run.db", dir_ / "missing" / "out.db");
  ASSERT_FALSE(no_dir.ok());
  EXPECT_NE(no_dir.message().find("out.db"), std::string::npos) << no_dir.message();
  auto self = copy_trace_database(dir_ / "run.db", dir_ / "run.db");
  ASSERT_FALSE(self.ok());
  EXPECT_FALSE(fs::exists(dir_ / "out.db"));
}

// A recording too large to load whole opens by its windows; zooming in reads the spans of the
// range from the file, and only when the windows say they are few enough.
TEST_F(TraceTest, ALargeRecordingOpensByItsOverviewAndReadsSpansOnZoom) {
  auto reader = telemetry::TraceReader::open(dir_ / "run.db");
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  ASSERT_TRUE((*reader)->has_span_windows());
  EXPECT_EQ((*reader)->span_count(), static_cast<std::int64_t>(counts_.spans));
  EXPECT_FALSE(TraceDetail::wants_overview(**reader, 1'000'000));
  ASSERT_TRUE(TraceDetail::wants_overview(**reader, 10'000));

  ConsoleModel model;
  ASSERT_TRUE(TraceDetail::open_overview(**reader, model).ok());
  ASSERT_TRUE(model.overview().has_value());
  EXPECT_TRUE(model.spans().empty());
  EXPECT_EQ(model.begin_ns(), (*reader)->start_ns());
  EXPECT_EQ(model.end_ns(), (*reader)->end_ns());
  // The windows count every span of the file (transfers once, on their source's send lane).
  std::int64_t counted = 0;
  for (std::int32_t d = 0; d < model.device_count(); ++d)
    for (int l = 0; l < kLaneCount; ++l)
      counted += model.spans().history().totals(d, static_cast<telemetry::Lane>(l), model.begin_ns() - 1'000'000'000,
                                                model.end_ns() + 1'000'000'000).spans;
  EXPECT_EQ(counted, static_cast<std::int64_t>(counts_.spans));
  EXPECT_NE(model.describe_held().find("overview of"), std::string::npos) << model.describe_held();
  EXPECT_FALSE(model.requests().rows().empty()) << "requests, summaries and load come whole";

  // The whole run holds too many spans for the limit: nothing is read.
  TraceDetail detail;
  const std::int64_t t0 = model.begin_ns();
  auto read = detail.ensure(**reader, model, t0, model.end_ns(), 100'000);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(*read);
  EXPECT_TRUE(model.spans().empty());
  // A tenth of a second (its second's window counts some 72 000) is few enough: its spans are
  // read, with what they overlap.
  const std::int64_t a = t0 + 1'200'000'000, b = a + 100'000'000;
  read = detail.ensure(**reader, model, a, b, 100'000);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_TRUE(*read);
  ASSERT_FALSE(model.spans().empty());
  auto spans = (*reader)->spans(model.overview()->detail_t0_ns, model.overview()->detail_t1_ns);
  ASSERT_TRUE(spans.ok());
  std::size_t transfers = 0;
  for (const auto& s : *spans) transfers += s.kind == telemetry::SpanKind::Transfer && s.peer >= 0 ? 1 : 0;
  EXPECT_EQ(model.spans().size(), spans->size() + transfers) << "each transfer also on its receive lane";
  EXPECT_LE(model.overview()->detail_t0_ns, a);
  EXPECT_GE(model.overview()->detail_t1_ns, b);
  EXPECT_NE(model.describe_held().find("read from the file"), std::string::npos) << model.describe_held();
  // Panning inside what was read reads nothing more.
  read = detail.ensure(**reader, model, a + 10'000'000, b + 10'000'000, 100'000);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(*read);

  // The console's way: the read runs on a thread, a later call hands its result over.
  const std::int64_t c = t0 + 2'500'000'000, e = c + 100'000'000;
  TraceDetail async;
  read = async.ensure_async(**reader, model, c, e, 100'000);
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(*read) << "the first call only starts the read";
  EXPECT_TRUE(async.reading());
  bool applied = false;
  for (int i = 0; i < 500 && !applied; ++i) {
    read = async.ensure_async(**reader, model, c, e, 100'000);
    ASSERT_TRUE(read.ok()) << read.status().message();
    applied = *read;
    if (!applied) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(applied);
  EXPECT_FALSE(async.reading());
  EXPECT_LE(model.overview()->detail_t0_ns, c);
  EXPECT_GE(model.overview()->detail_t1_ns, e);
  EXPECT_FALSE(model.spans().empty());
}

// The console's profile of what it holds (its whole-run windows, built from the spans it was
// fed) agrees with the recording's own windows, so a live run compares fairly with a file.
TEST_F(TraceTest, TheModelsProfileAgreesWithTheRecordings) {
  auto reader = telemetry::TraceReader::open(dir_ / "run.db");
  ASSERT_TRUE(reader.ok());
  ConsoleModel model;
  ASSERT_TRUE(load_trace(**reader, model).ok());
  const telemetry::RunProfile m = profile_model(model, "model");
  auto f = telemetry::profile_trace(**reader, "file");
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(m.devices.size(), f->devices.size());
  for (std::size_t i = 0; i < m.devices.size(); ++i) {
    EXPECT_EQ(m.devices[i].name, f->devices[i].name);
    EXPECT_NEAR(m.devices[i].busy_share, f->devices[i].busy_share, 0.01) << i;
    EXPECT_NEAR(m.devices[i].stall_share, f->devices[i].stall_share, 0.01) << i;
    EXPECT_NEAR(m.devices[i].rows_per_s, f->devices[i].rows_per_s, 0.01 * f->devices[i].rows_per_s) << i;
    EXPECT_NEAR(m.devices[i].mean_queued_tokens, f->devices[i].mean_queued_tokens,
                0.1 * f->devices[i].mean_queued_tokens + 1) << i;
  }
  const std::string table = telemetry::format_comparison(m, *f);
  EXPECT_NE(table.find(m.devices[0].name), std::string::npos) << table;
}

TEST(TraceLoader, MetadataStoredAsOneObjectOrAsKeys) {
  // A recorder may store the meta object whole; numbers stored as text still parse.
  struct Fake : telemetry::TraceReader {
    std::map<std::string, std::string> kv;
    int schema_version() const override { return 1; }
    std::map<std::string, std::string> metadata() const override { return kv; }
    std::int64_t start_ns() const override { return 0; }
    std::int64_t end_ns() const override { return 0; }
    std::vector<std::string> device_names() const override { return {"x0", "x1"}; }
    StatusOr<std::vector<telemetry::Span>> spans(std::int64_t, std::int64_t) const override { return std::vector<telemetry::Span>{}; }
    StatusOr<std::vector<telemetry::QueueSample>> queue_samples(std::int64_t, std::int64_t) const override { return std::vector<telemetry::QueueSample>{}; }
    StatusOr<std::vector<telemetry::ExpertLoad>> expert_load(std::int64_t, std::int64_t) const override { return std::vector<telemetry::ExpertLoad>{}; }
    StatusOr<std::vector<telemetry::RequestEvent>> requests(std::int64_t, std::int64_t) const override { return std::vector<telemetry::RequestEvent>{}; }
    StatusOr<std::vector<std::string>> control_events() const override { return std::vector<std::string>{}; }
    StatusOr<std::vector<std::string>> summaries() const override { return std::vector<std::string>{}; }
  } fake;
  fake.kv = {{"meta", R"({"model":{"name":"whole","blocks":4},"policy":{"name":"sync"}})"}, {"run_id", "12"}};
  auto meta = trace_run_meta(fake);
  ASSERT_TRUE(meta.ok()) << meta.status().message();
  EXPECT_EQ(meta->model_name, "whole");
  EXPECT_EQ(meta->blocks, 4);
  EXPECT_EQ(meta->run_id, 12u);
  ASSERT_EQ(meta->devices.size(), 2u);  // from DEVICES when META has none
  EXPECT_EQ(meta->device_name(1), "x1");

  fake.kv = {{"model", R"({"name":"keys"})"}, {"blocks_total", "x"}, {"policy", "not json, a plain string"}};
  meta = trace_run_meta(fake);
  ASSERT_TRUE(meta.ok()) << meta.status().message();  // the malformed key is dropped, not fatal
  EXPECT_EQ(meta->model_name, "keys");
  EXPECT_TRUE(meta->policy.name.empty());
}

TEST(TraceLoader, OpeningSomethingElseIsAnErrorNamingIt) {
  const fs::path p = fs::path(::testing::TempDir()) / ("not_a_trace_" + std::to_string(getpid()) + ".db");
  std::ofstream(p) << "hello";
  auto reader = telemetry::TraceReader::open(p);
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find(p.filename().string()), std::string::npos) << reader.status().message();
  fs::remove(p);
}

}  // namespace
}  // namespace sy::console
