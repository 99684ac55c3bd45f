// The messages that hold the ranks together (bootstrap, safe points, heartbeats, events, link
// refusals; docs/wire-format.md): each round-trips, and each refuses what no rank of this build
// sends, before anything is allocated or indexed by it.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "engine/dist/bootstrap_messages.h"
#include "engine/dist/control_messages.h"
#include "engine/dist/event_batch.h"

namespace sy::dist {
namespace {

// Decodes the body of an encoded message (after its type byte), to its end.
template <class M, class... Context>
Status decode_body(const std::string& bytes, M& out, const Context&... context) {
  ByteReader r(bytes.data() + 1, bytes.size() - 1);
  SY_RETURN_IF_ERROR(decode(r, context..., out));
  return r.left() == 0 ? Status::Ok() : Status::Error("bytes left over");
}

template <class M, class... Context>
void expect_round_trip(const M& m, const Context&... context) {
  const std::string bytes = encode(m);
  M back;
  ASSERT_TRUE(decode_body(bytes, back, context...).ok());
  EXPECT_EQ(encode(back), bytes);
  for (std::size_t n = 1; n < bytes.size(); ++n) {
    M cut;
    EXPECT_FALSE(decode_body(bytes.substr(0, n), cut, context...).ok()) << "a prefix of " << n << " bytes decoded";
  }
}

constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

TEST(RankMessages, SafePointMessagesRoundTrip) {
  expect_round_trip(DrainRequest{7});
  expect_round_trip(DrainAnswer{7, 2, true, 10, 9});
  expect_round_trip(ApplyAnswer{8});
  const Placement shape(3, 4, {true, false, true});
  RuntimePolicy policy;
  policy.microbatches = 3;
  expect_round_trip(ApplyChange{9, policy, std::nullopt}, shape);
  Placement moved = shape;
  expect_round_trip(ApplyChange{9, policy, moved}, shape);
}

TEST(RankMessages, HeartbeatsAndRefusalsRoundTrip) {
  const Heartbeat beat{1, 2, 5000, 4000, 4500};
  expect_round_trip(beat);
  EXPECT_EQ(encode(beat).size(), kHeartbeatBytes);
  expect_round_trip(Heartbeat{1, 2, 0, -1, 0});  // before it heard anything
  expect_round_trip(LinkRefusal{3, "rows take the device link"});
}

TEST(RankMessages, SafePointAndHeartbeatFieldsNoRankSendsAreRefused) {
  DrainAnswer answer;
  std::string bytes = encode(DrainAnswer{7, 1, true, 1, 1});
  bytes[1 + 8 + 4] = 2;  // the quiescent flag
  EXPECT_FALSE(decode_body(bytes, answer).ok());
  EXPECT_FALSE(decode_body(encode(DrainAnswer{7, -1, true, 1, 1}), answer).ok());
  LinkRefusal refusal;
  EXPECT_FALSE(decode_body(encode(LinkRefusal{-4, "x"}), refusal).ok());
  // Times a loop clock cannot give: the four-time offset would overflow on them.
  Heartbeat beat;
  EXPECT_FALSE(decode_body(encode(Heartbeat{1, 1, kMin, 0, 0}), beat).ok());
  EXPECT_FALSE(decode_body(encode(Heartbeat{1, 1, 5, kMax, 0}), beat).ok());
  EXPECT_FALSE(decode_body(encode(Heartbeat{1, 1, 5, -2, 0}), beat).ok());
  EXPECT_FALSE(decode_body(encode(Heartbeat{1, 1, 5, 4, -1}), beat).ok());
  EXPECT_FALSE(decode_body(encode(Heartbeat{-1, 1, 5, 4, 4}), beat).ok());
  const Placement shape(3, 4, {true, false, true});
  ApplyChange change;
  std::string apply = encode(ApplyChange{9, RuntimePolicy{}, std::nullopt});
  apply.back() = 3;  // the placement flag
  EXPECT_FALSE(decode_body(apply, change, shape).ok());
}

EventBatch sample_batch() {
  using K = RelayedEvent::Kind;
  EventBatch b{2, 5, {}};
  b.events.push_back({K::Execution, 1, 1, 0, 3, 0, 4, 0, 1000, 2000});
  b.events.push_back({K::Merge, 1, 0, 2, 0, 0, 8, 0, -50, 70});  // before rank 0's start: allowed
  b.events.push_back({K::SharedExpert, 1, 0, 1, 0, 2, 8, 0, 10, 20});
  b.events.push_back({K::Stall, 1, 1, 0, 0, 0, 0, 0, 0, 500});
  b.events.push_back({K::Transfer, 1, 3, 0, 0, 0, 16, 4096, 100, 200});
  return b;
}

TEST(RankMessages, EventBatchesRoundTrip) {
  expect_round_trip(sample_batch());
  expect_round_trip(EventBatch{1, 1, {}});
  EventBatch back;
  ASSERT_TRUE(decode_body(encode(sample_batch()), back).ok());
  EXPECT_EQ(back, sample_batch());
}

TEST(RankMessages, EventBatchesWithEventsNoRankSendsAreRefused) {
  EventBatch back;
  const auto refused = [&](RelayedEvent e) {
    EventBatch b{2, 5, {e}};
    return !decode_body(encode(b), back).ok();
  };
  using K = RelayedEvent::Kind;
  EXPECT_TRUE(refused({K::Stall, 1, 1, 0, 0, 0, 0, 0, 500, 400}));         // ends before it starts
  EXPECT_TRUE(refused({K::Stall, 1, 1, 0, 0, 0, 0, 0, kMin, 0}));          // no clock's time
  EXPECT_TRUE(refused({K::Stall, 1, 1, 0, 0, 0, 0, 0, 0, kMax}));
  EXPECT_TRUE(refused({K::Merge, 1, 0, 2, 0, 0, -8, 0, 0, 1}));            // negative tokens
  EXPECT_TRUE(refused({K::Transfer, 1, 3, 0, 0, 0, 8, -4096, 0, 1}));      // negative bytes
  std::string bytes = encode(EventBatch{2, 5, {RelayedEvent{K::Stall, 1, 1, 0, 0, 0, 0, 0, 0, 1}}});
  bytes[1 + 4 + 4 + 4] = 9;  // an unknown kind
  EXPECT_FALSE(decode_body(bytes, back).ok());
  // A count its bytes cannot hold is refused before anything is allocated for it (it used to
  // allocate 56 bytes per counted event: a 100 MB message asked for 5.6 GB).
  ByteWriter w;
  w.put<std::uint8_t>(static_cast<std::uint8_t>(MessageType::Events));
  w.put<std::int32_t>(1);
  w.put<std::uint32_t>(1);
  w.put<std::uint32_t>(std::numeric_limits<std::uint32_t>::max());
  w.put_raw(std::string(100, '\0').data(), 100);
  const Status many = decode_body(w.bytes(), back);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.message().find("4294967295 events in 100 bytes"), std::string::npos) << many.message();
}

TEST(RankMessages, PlausibleEventsNameTheSendersDevicesAndTheModelsLayers) {
  Topology t;
  t.num_devices = 3;
  t.num_blocks = 2;
  t.num_experts = 4;
  t.device_process = {0, 1, 1};
  t.rank_device = {0};
  using K = RelayedEvent::Kind;
  const RelayedEvent expert{K::Execution, 1, 1, 1, 3, 0, 4, 0, 0, 1};
  EXPECT_TRUE(plausible(expert, 1, t));
  EXPECT_FALSE(plausible(expert, 2, t));  // device 1 is rank 1's
  RelayedEvent e = expert;
  e.device = 0;  // rank 0's own
  EXPECT_FALSE(plausible(e, 1, t));
  e = expert;
  e.block = 2;
  EXPECT_FALSE(plausible(e, 1, t));
  e = expert;
  e.index = 4;
  EXPECT_FALSE(plausible(e, 1, t));
  e = expert;
  e.other = 256;  // 8 bits of it would be an attention layer
  EXPECT_FALSE(plausible(e, 1, t));
  EXPECT_FALSE(plausible({K::Stall, 1, 4, 0, 0, 0, 0, 0, 0, 1}, 1, t));    // no such stall reason
  EXPECT_TRUE(plausible({K::Stall, 2, 3, 0, 0, 0, 0, 0, 0, 1}, 1, t));
  EXPECT_FALSE(plausible({K::Transfer, 1, 3, 0, 0, 0, 1, 8, 0, 1}, 1, t)); // no device 3
}

Hello sample_hello() {
  Hello h;
  h.version = kWireVersion;
  h.rank = 1;
  h.world = 2;
  h.identity = {"tiny", 11, "disaggregated-1a2e", 12, "[[device]]\n", "generate", 13};
  h.endpoint = "tcp://node-2.cluster:40001";
  h.memory = "GPU-8f2c";
  return h;
}

TEST(RankMessages, BootstrapMessagesRoundTrip) {
  expect_round_trip(sample_hello());
  Hello back;
  ASSERT_TRUE(decode_body(encode(sample_hello()), back).ok());
  EXPECT_EQ(back, sample_hello());
  const Welcome welcome{{"tcp://127.0.0.1:40000", "tcp://10.0.0.2:40001"}, {"", ""}, std::string(256, 'n')};
  expect_round_trip(welcome, std::int32_t{2});
}

TEST(RankMessages, ABootstrapEndpointIsTcpHostAndPort) {
  EXPECT_TRUE(is_data_endpoint("tcp://127.0.0.1:1"));
  EXPECT_TRUE(is_data_endpoint("tcp://node-7_a.example.org:65535"));
  for (const char* bad : {"tcp://127.0.0.1:0", "tcp://127.0.0.1:65536", "tcp://127.0.0.1:", "tcp://:40000",
                          "tcp://127.0.0.1", "ipc:///tmp/rank", "inproc://x", "tcp://[::1]:40000",
                          "tcp://host name:1", "tcp://127.0.0.1:4000x", "tcp://127.0.0.1:0000040000", ""})
    EXPECT_FALSE(is_data_endpoint(bad)) << bad;
  Hello h = sample_hello();
  h.endpoint = "ipc:///tmp/rank";  // ZeroMQ would throw on every rank that connects to it
  Hello back;
  const Status s = decode_body(encode(h), back);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ipc:///tmp/rank"), std::string::npos) << s.message();
  Welcome w;
  EXPECT_FALSE(decode_body(encode(Welcome{{"tcp://127.0.0.1:40000", "bogus"}, {"", ""}, ""}), w, std::int32_t{2}).ok());
  h = sample_hello();
  h.version = kWireVersion + 1;
  const Status version = decode_body(encode(h), back);
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.message().find("the same switchyard build"), std::string::npos) << version.message();
}

// The fuzz target's committed seeds (tests/fuzz/corpus/wire) of these messages decode, so that
// its replay starts past their first field.
TEST(RankMessages, FuzzSeedsDecode) {
  const std::string dir = std::string(SY_SOURCE_DIR) + "/tests/fuzz/corpus/wire/";
  const auto read = [&](const char* name) {
    std::ifstream in(dir + name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EventBatch events;
  EXPECT_TRUE(decode_body(read("events"), events).ok());
  EXPECT_EQ(events.events.size(), 2u);
  DrainRequest drain;
  EXPECT_TRUE(decode_body(read("drain"), drain).ok());
  DrainAnswer drained;
  EXPECT_TRUE(decode_body(read("drained"), drained).ok());
  ApplyChange apply;
  const Status applied_seed = decode_body(read("apply-placement"), apply, Placement(3, 4, {true, false, true}));
  EXPECT_TRUE(applied_seed.ok()) << applied_seed.message();
  EXPECT_TRUE(apply.placement.has_value());
  ApplyAnswer applied;
  EXPECT_TRUE(decode_body(read("applied"), applied).ok());
  Heartbeat beat;
  EXPECT_TRUE(decode_body(read("heartbeat"), beat).ok());
  LinkRefusal refusal;
  EXPECT_TRUE(decode_body(read("link-refusal"), refusal).ok());
  Hello hello;
  EXPECT_TRUE(decode_body(read("hello"), hello).ok());
  const std::string welcome = read("welcome");  // its second byte is the world for the fuzz target
  Welcome w;
  EXPECT_TRUE(decode_body(welcome.substr(1), w, std::int32_t{welcome[1]}).ok());
}

}  // namespace
}  // namespace sy::dist
