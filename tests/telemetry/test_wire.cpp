#include "telemetry/wire.h"

#include <gtest/gtest.h>

#include <cstring>

namespace sy::telemetry {
namespace {

TEST(Wire, TopicNamesRoundTrip) {
  for (Topic t : kAllTopics) {
    auto parsed = parse_topic(topic_name(t));
    ASSERT_TRUE(parsed.has_value()) << topic_name(t);
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_FALSE(parse_topic("span").has_value());
  EXPECT_EQ(topic_name(Topic::ExpertLoad), "expert_load");
  EXPECT_TRUE(topic_is_json(Topic::Meta));
  EXPECT_FALSE(topic_is_json(Topic::Requests));
  EXPECT_EQ(record_size(Topic::Spans), 48);
  EXPECT_EQ(record_size(Topic::Queues), 40);
  EXPECT_EQ(record_size(Topic::ExpertLoad), 40);
  EXPECT_EQ(record_size(Topic::Requests), 32);
  EXPECT_EQ(record_size(Topic::Summary), 0);
}

TEST(Wire, EnumNames) {
  EXPECT_EQ(lane_name(Lane::Receive), "receive");
  EXPECT_EQ(span_kind_name(SpanKind::WeightFetch), "weight_fetch");
  EXPECT_EQ(stall_reason_name(StallReason::QueueEmpty), "queue_empty");
  EXPECT_EQ(layer_kind_name(LayerKind::Sampler), "sampler");
  EXPECT_EQ(request_phase_name(RequestPhase::FirstToken), "first_token");
  EXPECT_EQ(span_kind_name(static_cast<SpanKind>(200)), "unknown");
}

TEST(Wire, HeaderLayoutIsTheDocumentedBytes) {
  Span s;
  const EncodedBatch e = encode(Topic::Spans, 0x0102030405060708ull, 0x1112131415161718ull, &s, 1);
  ASSERT_EQ(e.header.size(), 32u);
  const auto* b = reinterpret_cast<const unsigned char*>(e.header.data());
  EXPECT_EQ(std::string(e.header.data(), 4), "SYT1");  // magic 0x31545953 little-endian
  EXPECT_EQ(b[4], 1);                                   // schema version
  EXPECT_EQ(b[6], 48);                                  // record size
  EXPECT_EQ(b[8], 1);                                   // record count
  EXPECT_EQ(b[16], 0x08);                               // sequence, little-endian
  EXPECT_EQ(b[23], 0x01);
  EXPECT_EQ(b[24], 0x18);  // run id
  EXPECT_EQ(e.topic, "spans");
  EXPECT_EQ(e.payload.size(), 48u);
}

TEST(Wire, BinaryTopicsRoundTrip) {
  std::vector<Span> spans(3);
  for (int i = 0; i < 3; ++i) {
    spans[i].start_ns = 100 * i;
    spans[i].end_ns = 100 * i + 50;
    spans[i].device = i;
    spans[i].kind = SpanKind::Stall;
    spans[i].stall_reason = StallReason::Barrier;
  }
  auto e = encode(Topic::Spans, 7, 42, spans.data(), 3);
  auto d = decode(e.topic, e.header, e.payload);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->topic, Topic::Spans);
  EXPECT_EQ(d->header.sequence, 7u);
  EXPECT_EQ(d->header.run_id, 42u);
  ASSERT_EQ(d->spans.size(), 3u);
  EXPECT_EQ(std::memcmp(d->spans.data(), spans.data(), 3 * sizeof(Span)), 0);

  QueueSample q;
  q.depth_tokens = 9;
  q.layer = LayerKind::Expert;
  e = encode(Topic::Queues, 0, 1, &q, 1);
  d = decode(e.topic, e.header, e.payload);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->queues.size(), 1u);
  EXPECT_EQ(d->queues[0].depth_tokens, 9);

  ExpertLoad l;
  l.tokens = 77;
  e = encode(Topic::ExpertLoad, 0, 1, &l, 1);
  d = decode(e.topic, e.header, e.payload);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->loads.size(), 1u);
  EXPECT_EQ(d->loads[0].tokens, 77);

  RequestEvent r;
  r.request_id = 5;
  r.phase = RequestPhase::Finished;
  e = encode(Topic::Requests, 0, 1, &r, 1);
  d = decode(e.topic, e.header, e.payload);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->requests.size(), 1u);
  EXPECT_EQ(d->requests[0].phase, RequestPhase::Finished);

  e = encode(Topic::Spans, 0, 1, nullptr, 0);
  d = decode(e.topic, e.header, e.payload);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->spans.empty());
}

TEST(Wire, JsonTopicsRoundTrip) {
  auto e = encode_json(Topic::Summary, 3, 9, R"([{"tokens_per_s":1.5},{"tokens_per_s":2}])", 2);
  EXPECT_EQ(e.topic, "summary");
  auto d = decode(e.topic, e.header, e.payload);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->header.record_size, 0);
  EXPECT_EQ(d->header.record_count, 2u);
  EXPECT_EQ(d->json, R"([{"tokens_per_s":1.5},{"tokens_per_s":2}])");
}

std::string error_of(std::string_view topic, const std::string& header, std::string_view payload) {
  auto d = decode(topic, header, payload);
  return d.ok() ? std::string("(decoded)") : d.status().message();
}

TEST(Wire, DecodeRejectsWhatDoesNotMatch) {
  Span s;
  const auto good = encode(Topic::Spans, 0, 1, &s, 1);
  EXPECT_NE(error_of("bogus", good.header, good.payload).find("unknown topic 'bogus'"), std::string::npos);
  EXPECT_NE(error_of("spans", good.header.substr(0, 31), good.payload).find("header is 31 bytes, expected 32"),
            std::string::npos);

  std::string h = good.header;
  h[0] = 'X';
  EXPECT_NE(error_of("spans", h, good.payload).find("bad magic"), std::string::npos);

  h = good.header;
  h[4] = 2;  // schema version 2
  EXPECT_NE(error_of("spans", h, good.payload).find("schema version 2 is not supported"), std::string::npos);
  h[4] = 0;
  EXPECT_NE(error_of("spans", h, good.payload).find("schema version 0"), std::string::npos);

  h = good.header;
  h[6] = 40;  // record size 40 on the spans topic
  EXPECT_NE(error_of("spans", h, good.payload).find("record size 40 does not match the topic's 48"), std::string::npos);
  // The right bytes on the wrong topic.
  EXPECT_NE(error_of("queues", good.header, good.payload).find("record size 48 does not match the topic's 40"),
            std::string::npos);

  EXPECT_NE(error_of("spans", good.header, good.payload.substr(0, 47)).find("payload is 47 bytes, expected 1 records"),
            std::string::npos);
  EXPECT_NE(error_of("spans", good.header, good.payload + "x").find("payload is 49 bytes"), std::string::npos);
}

TEST(Wire, DecodeRejectsBadJsonPayloads) {
  auto header = [](std::uint32_t count) { return encode_json(Topic::Control, 0, 1, "", count).header; };
  EXPECT_NE(error_of("control", header(1), "[{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("control", header(1), "{\"a\":1}").find("not a JSON array"), std::string::npos);
  EXPECT_NE(error_of("control", header(2), "[{}]").find("holds 1 objects, header says 2"), std::string::npos);
  EXPECT_NE(error_of("control", header(2), "[{},3]").find("non-object"), std::string::npos);
  EXPECT_NE(error_of("meta", header(1), "[{\"s\":\"\xff\"}]").find("not valid JSON"), std::string::npos);
  // A JSON topic's header with a record size is refused too.
  Span s;
  EXPECT_NE(error_of("control", encode(Topic::Spans, 0, 1, &s, 1).header, "[{}]").find("record size 48"),
            std::string::npos);
}

}  // namespace
}  // namespace sy::telemetry
