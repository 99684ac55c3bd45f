// tools/telemetry/subscribe.py, the documented third-party client, against a live hub.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "telemetry/telemetry_hub.h"

namespace sy::telemetry {
namespace {

std::string run(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  ::pclose(p);
  return out;
}

TEST(SubscribePy, PrintsLiveNumbersFromEveryTopic) {
  if (std::system("/usr/bin/python3 -c 'import zmq' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 has no zmq module (Debian package python3-zmq)";
  }
  HubOptions options;
  options.endpoint = "tcp://127.0.0.1:*";
  auto hub = TelemetryHub::start(options);
  ASSERT_TRUE(hub.ok()) << hub.status().message();
  Producer& producer = (*hub)->add_producer("sim");

  // The engine's side: a device busy 80 % of the time, a 37-token queue, a hot expert, one
  // summary per tick; run time advances 1 ms per tick.
  std::atomic<bool> stop{false};
  std::thread engine([&] {
    const std::int64_t ms = 1'000'000;
    for (std::int64_t tick = 0; !stop.load(); ++tick) {
      const std::int64_t t = tick * ms;
      Span busy;
      busy.start_ns = t;
      busy.end_ns = t + 8 * ms / 10;
      busy.device = 4;
      busy.kind = SpanKind::Expert;
      producer.span(busy);
      Span stall = busy;
      stall.start_ns = busy.end_ns;
      stall.end_ns = t + ms;
      stall.kind = SpanKind::Stall;
      stall.stall_reason = StallReason::QueueEmpty;
      producer.span(stall);
      Span other = busy;
      other.device = 0;
      other.end_ns = t + ms / 10;
      other.kind = SpanKind::Attention;
      producer.span(other);
      QueueSample q;
      q.t_ns = t;
      q.device = 5;
      q.layer = LayerKind::Expert;
      q.block = 5;
      q.index = 2;
      q.depth_tokens = 37;
      producer.queue(q);
      q.depth_tokens = 3;
      q.index = 1;
      producer.queue(q);
      ExpertLoad hot;
      hot.block = 5;
      hot.expert = 2;
      hot.tokens = 410;
      producer.load(hot);
      hot.expert = 1;
      hot.tokens = 10;
      producer.load(hot);
      RequestEvent r;
      r.t_ns = t;
      r.phase = RequestPhase::Finished;
      producer.request(r);
      (void)(*hub)->publish_json(Topic::Summary,
                                 R"({"tokens_per_s":1234.5,"itl_ms":{"count":9,"mean":1.5,"p50":1.25,"p90":2.0,"p99":3.5}})");
      if (tick % 10 == 0) {
        (void)(*hub)->publish_json(
            Topic::Meta, R"({"schema_version":1,"devices":[{"index":0,"name":"a0"},{"index":4,"name":"e0"},{"index":5,"name":"e1"}]})");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const std::string out = run("/usr/bin/python3 " SY_SOURCE_DIR "/tools/telemetry/subscribe.py --endpoint " +
                              (*hub)->endpoint() + " --duration 3.5 2>&1");
  stop = true;
  engine.join();

  EXPECT_NE(out.find("tokens/s 1234.5"), std::string::npos) << out;
  EXPECT_NE(out.find("ITL p50 1.25 ms p99 3.50 ms"), std::string::npos) << out;
  EXPECT_NE(out.find("busiest e0 80%"), std::string::npos) << out;
  EXPECT_NE(out.find("deepest queue e1 b5 expert 2: 37 tokens"), std::string::npos) << out;
  EXPECT_NE(out.find("hottest expert b5/e2: "), std::string::npos) << out;
  EXPECT_NE(out.find("lost 0"), std::string::npos) << out;
  EXPECT_NE(out.find("[run " + [&] {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>((*hub)->run_id()));
    return std::string(buf);
  }() + "]"), std::string::npos) << out;
  EXPECT_NE(out.find(" lost, 0 decode errors"), std::string::npos) << out;
  EXPECT_EQ(out.find("| decode errors"), std::string::npos) << out;
  EXPECT_EQ(out.find("Traceback"), std::string::npos) << out;
}

}  // namespace
}  // namespace sy::telemetry
