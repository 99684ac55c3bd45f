#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "telemetry/subscriber.h"
#include "telemetry/telemetry_hub.h"
#include "telemetry/trace_reader.h"
#include "tests/telemetry/test_support.h"

namespace sy::telemetry {
namespace {

using testing::eventually;

std::unique_ptr<TelemetryHub> start_hub(HubOptions options = {}) {
  if (options.endpoint.empty()) options.endpoint = "tcp://127.0.0.1:*";
  auto hub = TelemetryHub::start(std::move(options));
  EXPECT_TRUE(hub.ok()) << hub.status().message();
  return hub.ok() ? std::move(hub).value() : nullptr;
}

std::unique_ptr<Subscriber> connect(const std::string& endpoint, const CurveClientKeys* keys = nullptr) {
  auto sub = Subscriber::connect(endpoint, keys);
  EXPECT_TRUE(sub.ok()) << sub.status().message();
  return sub.ok() ? std::move(sub).value() : nullptr;
}

// PUB/SUB drops what is sent before the subscription reaches the publisher: publish a meta
// object until one arrives, so the test's real records are sent to a joined subscriber.
bool join(TelemetryHub& hub, Subscriber& sub) {
  return eventually([&] {
    (void)hub.publish_json(Topic::Meta, R"({"schema_version":1})");
    hub.flush();
    for (const Batch& b : sub.poll(std::chrono::milliseconds(20))) {
      if (b.topic == Topic::Meta) return true;
    }
    return false;
  });
}

// Polls until `want` batches of `topic` were seen (others are collected too).
std::vector<Batch> collect(Subscriber& sub, std::map<Topic, int> want) {
  std::vector<Batch> all;
  eventually([&] {
    for (Batch& b : sub.poll(std::chrono::milliseconds(20))) {
      if (want.count(b.topic) != 0) --want[b.topic];
      all.push_back(std::move(b));
    }
    for (const auto& [t, n] : want) {
      if (n > 0) return false;
    }
    return true;
  });
  return all;
}

TEST(TelemetryHub, SubscriberSeesEveryTopic) {
  HubOptions options;
  options.drain_interval = std::chrono::hours(1);  // only flush() drains: one message per topic
  auto hub = start_hub(options);
  ASSERT_TRUE(hub);
  EXPECT_NE(hub->run_id(), 0u);
  EXPECT_TRUE(hub->endpoint().starts_with("tcp://127.0.0.1:")) << hub->endpoint();
  auto sub = connect(hub->endpoint());
  ASSERT_TRUE(sub);
  ASSERT_TRUE(join(*hub, *sub));

  Producer& a = hub->add_producer("a0");
  Producer& b = hub->add_producer("e0");
  Span s;
  s.start_ns = 10;
  s.end_ns = 20;
  s.device = 4;
  s.kind = SpanKind::Expert;
  s.index = 2;
  s.tokens = 7;
  ASSERT_TRUE(a.span(s));
  s.device = 5;
  ASSERT_TRUE(b.span(s));
  QueueSample q;
  q.device = 4;
  q.depth_tokens = 33;
  ASSERT_TRUE(a.queue(q));
  ExpertLoad l;
  l.block = 3;
  l.expert = 1;
  l.tokens = 99;
  ASSERT_TRUE(b.load(l));
  RequestEvent r;
  r.request_id = 12;
  r.phase = RequestPhase::FirstToken;
  ASSERT_TRUE(a.request(r));
  ASSERT_TRUE(hub->publish_json(Topic::Control, R"({"cmd":"pause","ok":true})").ok());
  ASSERT_TRUE(hub->publish_json(Topic::Summary, R"({"tokens_per_s":12.5})").ok());
  ASSERT_TRUE(hub->publish_json(Topic::Summary, R"({"tokens_per_s":13.5})").ok());
  hub->flush();

  const auto batches = collect(*sub, {{Topic::Spans, 1}, {Topic::Queues, 1}, {Topic::ExpertLoad, 1},
                                      {Topic::Requests, 1}, {Topic::Control, 1}, {Topic::Summary, 1}});
  std::map<Topic, const Batch*> by_topic;
  for (const Batch& batch : batches) {
    EXPECT_EQ(batch.header.run_id, hub->run_id());
    by_topic[batch.topic] = &batch;
  }
  ASSERT_EQ(by_topic.count(Topic::Spans), 1u);
  // Both producers' spans travel in one message.
  ASSERT_EQ(by_topic[Topic::Spans]->spans.size(), 2u);
  EXPECT_EQ(by_topic[Topic::Spans]->spans[0].tokens, 7);
  EXPECT_EQ(by_topic[Topic::Spans]->spans[1].device, 5);
  ASSERT_EQ(by_topic.count(Topic::Queues), 1u);
  EXPECT_EQ(by_topic[Topic::Queues]->queues.at(0).depth_tokens, 33);
  ASSERT_EQ(by_topic.count(Topic::ExpertLoad), 1u);
  EXPECT_EQ(by_topic[Topic::ExpertLoad]->loads.at(0).tokens, 99);
  ASSERT_EQ(by_topic.count(Topic::Requests), 1u);
  EXPECT_EQ(by_topic[Topic::Requests]->requests.at(0).request_id, 12);
  ASSERT_EQ(by_topic.count(Topic::Control), 1u);
  EXPECT_EQ(nlohmann::json::parse(by_topic[Topic::Control]->json)[0]["cmd"], "pause");
  ASSERT_EQ(by_topic.count(Topic::Summary), 1u);
  const auto summaries = nlohmann::json::parse(by_topic[Topic::Summary]->json);
  ASSERT_EQ(summaries.size(), 2u);
  EXPECT_EQ(summaries[1]["tokens_per_s"], 13.5);
  EXPECT_EQ(sub->lost_messages(), 0u);
  EXPECT_EQ(sub->decode_errors(), 0u);
  EXPECT_EQ(sub->run_id(), hub->run_id());
  EXPECT_GT(sub->last_message().time_since_epoch().count(), 0);

  EXPECT_EQ(hub->counters(Topic::Spans).records, 2u);
  EXPECT_EQ(hub->counters(Topic::Summary).records, 2u);
  EXPECT_EQ(hub->counters(Topic::Summary).messages, 1u);
  EXPECT_EQ(hub->dropped_records(), 0u);
}

TEST(TelemetryHub, BatchesAreCappedAndSequenced) {
  HubOptions options;
  options.max_records_per_message = 4096;
  options.rings.spans = 16384;
  options.drain_interval = std::chrono::hours(1);
  auto hub = start_hub(options);
  ASSERT_TRUE(hub);
  auto sub = connect(hub->endpoint());
  ASSERT_TRUE(join(*hub, *sub));
  Producer& p = hub->add_producer("w");
  for (int i = 0; i < 10000; ++i) {
    Span s;
    s.start_ns = i;
    ASSERT_TRUE(p.span(s));
  }
  hub->flush();
  const auto batches = collect(*sub, {{Topic::Spans, 3}});
  std::vector<std::uint32_t> counts;
  std::vector<std::uint64_t> sequences;
  std::int64_t next_start = 0;
  bool in_order = true;
  for (const Batch& b : batches) {
    if (b.topic != Topic::Spans) continue;
    counts.push_back(b.header.record_count);
    sequences.push_back(b.header.sequence);
    for (const Span& s : b.spans) in_order = in_order && s.start_ns == next_start++;
  }
  EXPECT_EQ(counts, (std::vector<std::uint32_t>{4096, 4096, 1808}));
  EXPECT_EQ(sequences, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_TRUE(in_order);
  EXPECT_EQ(hub->counters(Topic::Spans).messages, 3u);
  EXPECT_EQ(hub->counters(Topic::Spans).records, 10000u);
}

TEST(TelemetryHub, FullRingsDropAndCount) {
  HubOptions options;
  options.endpoint = "";  // no socket needed
  options.rings.spans = 16;
  options.rings.requests = 8;
  options.drain_interval = std::chrono::hours(1);  // only flush() drains
  auto hub = TelemetryHub::start(options);
  ASSERT_TRUE(hub.ok()) << hub.status().message();
  EXPECT_EQ((*hub)->endpoint(), "");
  Producer& p = (*hub)->add_producer("w");
  int accepted = 0;
  for (int i = 0; i < 100; ++i) accepted += p.span(Span{}) ? 1 : 0;
  for (int i = 0; i < 10; ++i) accepted += p.request(RequestEvent{}) ? 1 : 0;
  EXPECT_EQ(accepted, 16 + 8);
  EXPECT_EQ(p.dropped(), 84u + 2u);
  EXPECT_EQ((*hub)->counters(Topic::Spans).dropped, 84u);
  EXPECT_EQ((*hub)->counters(Topic::Requests).dropped, 2u);
  EXPECT_EQ((*hub)->dropped_records(), 86u);
  (*hub)->flush();
  EXPECT_EQ((*hub)->counters(Topic::Spans).records, 16u);
  // Drained rings take records again.
  EXPECT_TRUE(p.span(Span{}));
}

// A producer told to wait (a virtual clock's) loses nothing while the publisher drains; with
// nobody draining it gives up after its limit and drops, as any producer.
TEST(TelemetryHub, AWaitingProducerLosesNothingWhileThePublisherDrains) {
  HubOptions options;
  options.endpoint = "";
  options.rings.spans = 16;
  options.drain_interval = std::chrono::milliseconds(1);
  auto hub = TelemetryHub::start(options);
  ASSERT_TRUE(hub.ok()) << hub.status().message();
  Producer& p = (*hub)->add_producer("w");
  p.wait_when_full(std::chrono::seconds(5));
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(p.span(Span{})) << "record " << i;
  (*hub)->flush();
  EXPECT_EQ(p.dropped(), 0u);
  EXPECT_EQ((*hub)->counters(Topic::Spans).records, 2000u);

  options.drain_interval = std::chrono::hours(1);  // only flush() drains: nobody does
  auto idle = TelemetryHub::start(options);
  ASSERT_TRUE(idle.ok()) << idle.status().message();
  Producer& q = (*idle)->add_producer("w");
  q.wait_when_full(std::chrono::milliseconds(20));
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(q.span(Span{}));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(q.span(Span{}));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(20)) << "it gave up before its limit";
  EXPECT_EQ(q.dropped(), 1u);
}

TEST(TelemetryHub, PublishJsonChecksItsInput) {
  HubOptions options;
  options.endpoint = "";
  options.max_pending_json = 2;
  options.drain_interval = std::chrono::hours(1);
  auto hub = TelemetryHub::start(options);
  ASSERT_TRUE(hub.ok());
  Status s = (*hub)->publish_json(Topic::Spans, "{}");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("binary records"), std::string::npos);
  s = (*hub)->publish_json(Topic::Meta, "[1,2]");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not one JSON object"), std::string::npos);
  EXPECT_FALSE((*hub)->publish_json(Topic::Meta, "{\"a\":").ok());
  EXPECT_TRUE((*hub)->publish_json(Topic::Meta, "{}").ok());
  EXPECT_TRUE((*hub)->publish_json(Topic::Meta, "{}").ok());
  EXPECT_TRUE((*hub)->publish_json(Topic::Meta, "{}").ok());  // over the cap: dropped, counted
  EXPECT_EQ((*hub)->counters(Topic::Meta).dropped, 1u);
  (*hub)->flush();
  EXPECT_EQ((*hub)->counters(Topic::Meta).records, 2u);
}

TEST(TelemetryHub, RunIdsDifferAndBadEndpointsAreNamed) {
  HubOptions options;
  options.endpoint = "";
  auto a = TelemetryHub::start(options);
  auto b = TelemetryHub::start(options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->run_id(), (*b)->run_id());
  options.run_id = 77;
  auto c = TelemetryHub::start(options);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->run_id(), 77u);

  options.endpoint = "tcp://no-such-host.invalid:5555";
  auto bad = TelemetryHub::start(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tcp://no-such-host.invalid:5555"), std::string::npos);

  auto hub = start_hub();
  ASSERT_TRUE(hub);
  options.endpoint = hub->endpoint();  // in use
  auto taken = TelemetryHub::start(options);
  ASSERT_FALSE(taken.ok());
  EXPECT_NE(taken.status().message().find(hub->endpoint()), std::string::npos);

  auto sub = Subscriber::connect("localhost:5555");
  ASSERT_FALSE(sub.ok());
  EXPECT_NE(sub.status().message().find("localhost:5555"), std::string::npos);
}

TEST(TelemetryHub, DestructorPublishesWhatIsLeft) {
  HubOptions options;
  options.drain_interval = std::chrono::hours(1);
  auto hub = start_hub(options);
  ASSERT_TRUE(hub);
  auto sub = connect(hub->endpoint());
  ASSERT_TRUE(join(*hub, *sub));
  hub->add_producer("w").span(Span{});
  hub.reset();
  const auto batches = collect(*sub, {{Topic::Spans, 1}});
  int spans = 0;
  for (const auto& b : batches) spans += b.topic == Topic::Spans ? static_cast<int>(b.spans.size()) : 0;
  EXPECT_EQ(spans, 1);
}

// A raw PUB stands in for the engine to make gaps, restarts and garbage on demand.
class RawPublisher {
 public:
  RawPublisher() : socket_(context_, zmq::socket_type::pub) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }
  void send(const EncodedBatch& b) { send_frames({b.topic, b.header, b.payload}); }
  void send_frames(const std::vector<std::string>& frames) {
    for (std::size_t i = 0; i < frames.size(); ++i) {
      socket_.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_;
  std::string endpoint_;
};

TEST(Subscriber, CountsSequenceGapsWithinARunAndResetsOnANewRun) {
  RawPublisher pub;
  auto sub = connect(pub.endpoint());
  ASSERT_TRUE(sub);
  Span s;
  // Joined once a message arrives; sequences from here on are the test's.
  std::uint64_t probe = 0;
  ASSERT_TRUE(eventually([&] {
    pub.send(encode(Topic::Queues, probe++, 1, nullptr, 0));
    return !sub->poll(std::chrono::milliseconds(20)).empty();
  }));
  const std::uint64_t lost_before = sub->lost_messages();  // the probes may have lost some

  for (std::uint64_t seq : {0, 1, 5, 6}) pub.send(encode(Topic::Spans, seq, 1, &s, 1));
  int got = 0;
  ASSERT_TRUE(eventually([&] {
    for (const auto& b : sub->poll(std::chrono::milliseconds(20))) got += b.topic == Topic::Spans ? 1 : 0;
    return got == 4;
  }));
  EXPECT_EQ(sub->lost_messages() - lost_before, 3u);  // 2, 3 and 4
  EXPECT_EQ(sub->run_id(), 1u);

  // The engine restarted: sequences start again at 0 under a new run id, which is no loss.
  for (std::uint64_t seq : {0, 1}) pub.send(encode(Topic::Spans, seq, 2, &s, 1));
  got = 0;
  ASSERT_TRUE(eventually([&] {
    for (const auto& b : sub->poll(std::chrono::milliseconds(20))) got += b.topic == Topic::Spans ? 1 : 0;
    return got == 2;
  }));
  EXPECT_EQ(sub->lost_messages() - lost_before, 3u);
  EXPECT_EQ(sub->run_id(), 2u);
}

TEST(Subscriber, CountsAndSkipsMessagesThatDoNotDecode) {
  RawPublisher pub;
  auto sub = connect(pub.endpoint());
  ASSERT_TRUE(sub);
  ASSERT_TRUE(eventually([&] {
    pub.send(encode(Topic::Queues, 0, 1, nullptr, 0));
    return !sub->poll(std::chrono::milliseconds(20)).empty();
  }));
  pub.send_frames({"spans", "short header", ""});
  pub.send_frames({"spans", std::string(32, '\0')});
  pub.send_frames({"nonsense", std::string(32, '\0'), ""});
  Span s;
  pub.send(encode(Topic::Spans, 0, 1, &s, 1));
  int good = 0;
  ASSERT_TRUE(eventually([&] {
    for (const auto& b : sub->poll(std::chrono::milliseconds(20))) good += b.topic == Topic::Spans ? 1 : 0;
    return good == 1;
  }));
  EXPECT_EQ(sub->decode_errors(), 3u);
}

TEST(TelemetryHub, RecordsWhatItPublishes) {
  testing::TempDir dir;
  HubOptions options;
  options.drain_interval = std::chrono::hours(1);
  auto hub = TelemetryHub::start(options);
  ASSERT_TRUE(hub.ok());
  Producer& p = (*hub)->add_producer("w");
  p.span(Span{});  // before the recording: not in it
  (*hub)->flush();

  RecorderOptions rec;
  rec.path = dir / "hub.db";
  ASSERT_TRUE((*hub)->start_recording(rec).ok());
  EXPECT_EQ((*hub)->recording_path(), rec.path);
  const Status twice = (*hub)->start_recording(rec);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("is running"), std::string::npos);
  Span s;
  s.start_ns = 20;
  s.end_ns = 30;
  p.span(s);
  s.start_ns = 30;
  s.end_ns = 40;
  p.span(s);
  RequestEvent r;
  r.t_ns = 25;
  p.request(r);
  ASSERT_TRUE((*hub)->publish_json(Topic::Control, R"({"t_ns":35,"cmd":"record_start","ok":true})").ok());
  ASSERT_TRUE((*hub)->publish_json(Topic::Meta, R"({"now_ns":35})").ok());
  ASSERT_TRUE((*hub)->stop_recording().ok());
  EXPECT_FALSE((*hub)->recording_path().has_value());
  const Status none = (*hub)->stop_recording();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.message(), "no recording is running");

  auto opened = TraceReader::open(rec.path);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  auto& reader = *opened;
  EXPECT_EQ(reader->metadata().at("run_id"), std::to_string((*hub)->run_id()));
  EXPECT_EQ(reader->spans()->size(), 2u);
  EXPECT_EQ(reader->requests()->size(), 1u);
  EXPECT_EQ(reader->control_events()->size(), 1u);
  EXPECT_EQ(reader->start_ns(), 20);
}

}  // namespace
}  // namespace sy::telemetry
