// Messages between ranks that no rank of the deployment would send (crafted, or from a binary
// out of step): each is dropped with its reason and the receiving rank keeps serving. Before,
// a header's block indexed a worker's table unchecked (SIGSEGV), a payload for another rank's
// device reached an empty receiver (std::bad_function_call), and an event's device number
// grew rank 0's metrics table (std::bad_alloc).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/cpu/cpu_deployment.h"
#include "engine/cpu/host_activation_ops.h"
#include "engine/dist/event_relay.h"
#include "engine/dist/process_group.h"
#include "engine/dist/shipment_codec.h"
#include "engine/dist/zmq_transport.h"
#include "engine/model/random_model.h"
#include "engine/runtime/wall_clock_event_loop.h"
#include "tests/dist/two_ranks.h"

namespace sy::dist {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string message(MessageType type, const std::function<void(ByteWriter&)>& body) {
  ByteWriter w;
  w.put<std::uint8_t>(static_cast<std::uint8_t>(type));
  body(w);
  return std::string(w.bytes().begin(), w.bytes().end());
}

std::string header(const ShipmentHeader& h) {
  return message(MessageType::Header, [&](ByteWriter& w) { encode_header(w, h); });
}

std::string payload(const Shipment& s) {
  return message(MessageType::Payload, [&](ByteWriter& w) { encode_payload(w, s); });
}

// Rank 0 runs device 0 through a ZmqTransport whose receiver refuses what its checks refuse;
// rank 1 (device 1) sends what it likes.
TEST(HostilePeer, ShipmentsForDevicesElsewhereOrThatTheReceiverRefusesAreDropped) {
  std::vector<Rendezvous> rv = two_ranks();
  ProcessLinks zero(std::move(rv[0]), 0), one(std::move(rv[1]), 1);
  WallClockEventLoop loop;
  ZmqTransport transport(loop, 2, 16, LinkModel{}, nullptr, {0, 1}, zero);
  std::vector<ShipmentHeader> headers;
  std::vector<Shipment> payloads;
  transport.set_receiver(0, {[&](const ShipmentHeader& h) { headers.push_back(h); },
                             [&](Shipment&& s) { payloads.push_back(std::move(s)); },
                             [](const ShipmentHeader& h) {
                               return h.block == 0 ? Status::Ok() : Status::Error("block " + std::to_string(h.block));
                             },
                             [](const Shipment& s) {
                               return s.group == 99 ? Status::Error("group 99") : Status::Ok();
                             }});
  zero.start();
  one.start();
  loop.begin_outside_work();
  // Device 1 is rank 1's: neither its header nor its payload has a receiver here.
  one.send(0, header({1, 1, LayerKind::Expert, 0, 0, 3, 48}));
  one.send(0, payload(Shipment{1, 1, LayerKind::Expert, 0, 0, {}}));
  one.send(0, header({1, 0, LayerKind::Expert, 100000000, 0, 3, 48}));  // the receiver's check refuses it
  one.send(0, payload(Shipment{1, 0, LayerKind::Expert, 0, 99, {}}));   // and this one
  one.send(0, header({1, 0, LayerKind::Expert, 0, 7, 0, 0}));           // a good pair, last
  one.send(0, payload(Shipment{1, 0, LayerKind::Expert, 0, 7, {}}));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  loop.run([&] { return !payloads.empty() || std::chrono::steady_clock::now() > deadline; });
  loop.end_outside_work();
  one.stop();
  zero.stop();
  ASSERT_EQ(headers.size(), 1u);
  EXPECT_EQ(headers[0].group, 7);
  ASSERT_EQ(payloads.size(), 1u);
  EXPECT_EQ(payloads[0].group, 7);
  EXPECT_EQ(transport.received_remote(), 1u);
  EXPECT_EQ(transport.in_flight_to(0), 0);
}

// Rank 0's relay takes the events of rank 1's devices only, with blocks, layers and reasons the
// model has; a batch with anything else is dropped whole.
TEST(HostilePeer, RelayedEventsNamingWhatTheDeploymentDoesNotHaveAreDropped) {
  struct Seen final : RuntimeObserver {
    void on_stall(std::int32_t device, StallReason, std::int64_t, std::int64_t) override { devices.push_back(device); }
    void on_execution(std::int32_t device, LayerKind, std::int32_t, std::int32_t, std::int32_t, std::int64_t,
                      std::int64_t, std::int64_t) override {
      devices.push_back(device);
    }
    std::vector<std::int32_t> devices;
  } seen;
  const ModelConfig config = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32);
  Topology topology = Topology::disaggregated(config, 1, 2);
  topology.device_process = {0, 1, 1};
  std::vector<Rendezvous> rv = two_ranks();
  ProcessLinks zero(std::move(rv[0]), 0), one(std::move(rv[1]), 1);
  WallClockEventLoop loop;
  receive_relayed_events(zero, loop, seen, /*run=*/1, topology);
  const auto events = [](std::int32_t device, std::uint8_t kind, std::int32_t other, std::int32_t block) {
    return message(MessageType::Events, [&](ByteWriter& w) {
      w.put<std::int32_t>(1);  // rank
      w.put<std::uint32_t>(1);  // run
      w.put<std::uint32_t>(1);  // count
      w.put<std::uint8_t>(kind);
      w.put<std::int32_t>(device);
      w.put<std::int32_t>(other);
      if (kind == 0) {  // execution: block, index, group, tokens
        w.put<std::int32_t>(block);
        w.put<std::int32_t>(0);
        w.put<std::int32_t>(0);
        w.put<std::int64_t>(4);
      }
      w.put<std::int64_t>(0);
      w.put<std::int64_t>(1000);
    });
  };
  zero.start();
  one.start();
  loop.begin_outside_work();
  one.send(0, events(100000000, 2, 0, 0));  // a stall of no such device
  one.send(0, events(0, 2, 0, 0));          // of rank 0's own device
  one.send(0, events(1, 2, 9, 0));          // an unknown stall reason
  one.send(0, events(1, 0, 1, 1000));       // an expert execution of no such block
  one.send(0, events(2, 2, 1, 0));          // good: device 2 is rank 1's, reason barrier
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  loop.run([&] { return !seen.devices.empty() || std::chrono::steady_clock::now() > deadline; });
  loop.end_outside_work();
  one.stop();
  zero.stop();
  EXPECT_EQ(seen.devices, std::vector<std::int32_t>{2});
}

// What the workers of a deployment accept from another process: their own layers and admitted
// requests only (Worker::check_remote), checked against the state they are in.
TEST(HostilePeer, AWorkerTakesOnlyItsOwnLayersAndRequestsFromAPeer) {
  const fs::path dir = fs::temp_directory_path() / ("sy_test_hostile_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 1, dir).ok());
  auto weights = *ModelWeights::load(dir);
  const ModelConfig& c = weights->config();
  DeploymentOptions o;
  o.kv_pages_per_rank = 16;
  o.page_size = 16;
  CpuDeployment d(weights, Topology::disaggregated(c, 1, 2), o);  // device 0 attention, 1 and 2 experts
  const Topology& t = d.cluster().topology();
  const std::int32_t expert_device = 1;
  const std::int32_t hosted = t.device_expert_ids[expert_device].at(0);
  std::int32_t elsewhere = -1;
  for (std::int32_t e = 0; e < t.num_experts && elsewhere < 0; ++e)
    if (std::find(t.device_expert_ids[expert_device].begin(), t.device_expert_ids[expert_device].end(), e) ==
        t.device_expert_ids[expert_device].end())
      elsewhere = e;
  ASSERT_GE(elsewhere, 0);

  HostActivationOps ops;
  const auto expert_shipment = [&](std::int32_t block, std::int32_t expert, std::int32_t rank) {
    Shipment s{0, expert_device, LayerKind::Expert, block, 0, {}};
    TokenBatch b;
    b.layer = LayerId::expert(block, expert);
    b.columns = kExpertColumns;
    b.row.push_back({.request = 5, .rank = rank, .slot = 0, .weight = 1.0f, .entry = 0});
    b.hidden = ops.allocate(1, c.hidden_size);
    s.batches.push_back(std::move(b));
    return s;
  };
  const auto refusal = [](const Status& s) { return s.ok() ? std::string("accepted") : s.message(); };
  Worker& experts = d.cluster().worker(expert_device);
  EXPECT_TRUE(experts.check_remote(expert_shipment(0, hosted, 0)).ok());
  EXPECT_NE(refusal(experts.check_remote(expert_shipment(0, elsewhere, 0))).find("does not host"), std::string::npos);
  EXPECT_NE(refusal(experts.check_remote(expert_shipment(0, 1000, 0))).find("does not host"), std::string::npos);
  EXPECT_NE(refusal(experts.check_remote(expert_shipment(100000000, hosted, 0))).find("has no experts"),
            std::string::npos);
  EXPECT_NE(refusal(experts.check_remote(expert_shipment(0, hosted, 7))).find("attention rank 7"), std::string::npos);
  // Activations the executors would read past (they assert the width only in debug builds).
  Shipment narrow = expert_shipment(0, hosted, 0);
  narrow.batches[0].hidden = ops.allocate(1, 1);
  EXPECT_NE(refusal(experts.check_remote(narrow)).find("activations of 1 x 1 for 1 rows of block 0"), std::string::npos)
      << refusal(experts.check_remote(narrow));
  narrow.batches[0].hidden = ops.allocate(2, c.hidden_size);
  EXPECT_NE(refusal(experts.check_remote(narrow)).find("activations of 2 x"), std::string::npos);
  narrow.batches[0].hidden.reset();
  EXPECT_NE(refusal(experts.check_remote(narrow)).find("1 rows of block 0 without activations"), std::string::npos);
  Shipment misaddressed = expert_shipment(0, hosted, 0);
  misaddressed.dst = 2;
  EXPECT_NE(refusal(experts.check_remote(misaddressed)).find("addressed to device 2"), std::string::npos);
  EXPECT_TRUE(experts.check_remote(ShipmentHeader{0, expert_device, LayerKind::Expert, 0, 0, 1, 16}).ok());
  EXPECT_NE(refusal(experts.check_remote(ShipmentHeader{0, expert_device, LayerKind::Expert, 100000000, 0, 1, 16}))
                .find("block 100000000"),
            std::string::npos);

  // The attention device: rows of a request it has not admitted, and expert outputs no pooled
  // request waits for.
  Worker& attention = d.cluster().worker(0);
  Shipment rows{1, 0, LayerKind::Attention, 1, 0, {}};
  TokenBatch a;
  a.layer = LayerId::attention(1, 0);
  a.columns = kAttentionColumns;
  a.row.push_back({.request = 12345, .position = 3, .rank = 0});
  a.hidden = ops.allocate(1, c.hidden_size);
  rows.batches.push_back(std::move(a));
  EXPECT_NE(refusal(attention.check_remote(rows)).find("request 12345, which is not admitted"), std::string::npos);
  rows.batches[0].layer = LayerId::attention(1, 4);
  EXPECT_NE(refusal(attention.check_remote(rows)).find("attention rank 4"), std::string::npos);
  Shipment outputs{1, 0, LayerKind::Attention, 1, 0, {}};
  TokenBatch out;
  out.layer = LayerId::attention(1, 0);
  out.columns = kOutputColumns;
  out.row.push_back({.request = 5, .slot = 0, .entry = 0});
  out.hidden = ops.allocate(1, c.hidden_size);
  outputs.batches.push_back(std::move(out));
  EXPECT_NE(refusal(attention.check_remote(outputs)).find("no request in the token pool awaits"), std::string::npos);
  fs::remove_all(dir);
}

// A Sampled from another process reaches the coordinator, which indexes its records by the
// request, only when an attention rank of that process holds the request and the token is the
// model's. Before, an unknown request indexed past rank 0's records.
TEST(HostilePeer, RankZeroTakesSampledTokensOnlyOfRequestsARemoteRankHolds) {
  const fs::path dir = fs::temp_directory_path() / ("sy_test_hostile_sampled_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 1, dir).ok());
  auto weights = *ModelWeights::load(dir);
  const ModelConfig& c = weights->config();
  Topology topology = Topology::disaggregated(c, 2, 2);  // devices 0 and 1 attention, 2 and 3 experts
  topology.vocab_size = c.vocab_size;
  topology.device_process = {0, 1, 0, 0};  // rank 1's device runs in process 1
  DeploymentOptions o;
  o.kv_pages_per_rank = 16;
  o.page_size = 16;
  CpuDeployment d(weights, topology, o);
  Cluster& cluster = d.cluster();
  ASSERT_TRUE(cluster.remote_rank(1));
  ASSERT_FALSE(cluster.remote_rank(0));
  ASSERT_TRUE(cluster.kv(1).admit(7, 4, SamplingSpec{}));  // rank 0's manager allocates for rank 1
  ASSERT_TRUE(cluster.kv(0).admit(8, 4, SamplingSpec{}));
  const auto refusal = [](const Status& s) { return s.ok() ? std::string("accepted") : s.message(); };
  EXPECT_EQ(refusal(check_sampled(cluster, Sampled{7, 3, std::nullopt})), "accepted");
  EXPECT_EQ(refusal(check_sampled(cluster, Sampled{7, -1, std::nullopt})), "accepted");  // a prompt chunk
  EXPECT_EQ(refusal(check_sampled(cluster, Sampled{7, c.vocab_size - 1, std::nullopt})), "accepted");
  EXPECT_NE(refusal(check_sampled(cluster, Sampled{7, c.vocab_size, std::nullopt})).find("beyond the vocabulary"),
            std::string::npos);
  EXPECT_NE(refusal(check_sampled(cluster, Sampled{123456789, 3, std::nullopt})).find("request 123456789 is open on no"),
            std::string::npos);
  // Rank 0's own requests are sampled here, never by a peer.
  EXPECT_NE(refusal(check_sampled(cluster, Sampled{8, 3, std::nullopt})).find("request 8 is open on no"),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sy::dist
