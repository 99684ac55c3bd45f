// LoopTransport: arrival times from the link model, whatever the shipment's size (the transport
// tabulates the wire time of small shipments; larger ones are computed per send).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/loop_transport.h"
#include "engine/runtime/virtual_event_loop.h"

namespace sy {
namespace {

// α + ⌊bytes/β⌋ as the link model defines it, computed here independently of the transport.
std::int64_t expected_ns(std::int64_t latency, double bytes_per_ns, std::int64_t bytes) {
  return latency + (bytes_per_ns > 0 ? static_cast<std::int64_t>(static_cast<double>(bytes) / bytes_per_ns) : 0);
}

Shipment shipment_of(std::int32_t src, std::int32_t dst, std::int64_t rows) {
  Shipment s{src, dst, LayerKind::Attention, 0, -1, {}};
  TokenBatch b;
  b.row.resize(static_cast<std::size_t>(rows));
  s.batches.push_back(std::move(b));
  return s;
}

TEST(LoopTransport, WireTimeFollowsTheLinkModelAcrossShipmentSizes) {
  constexpr std::int64_t kBytesPerRow = 8'197;
  LinkModel link;
  link.latency_ns = 1'300;
  link.bytes_per_ns = 451.3;
  link.devices_per_node = 2;
  link.inter_node_latency_ns = 7'000;
  link.inter_node_bytes_per_ns = 23.7;
  VirtualEventLoop loop;
  LoopTransport transport(loop, 4, kBytesPerRow, link, nullptr);
  std::vector<std::int64_t> arrived;
  for (std::int32_t d = 0; d < 4; ++d) transport.set_receiver(d, {{}, [&](Shipment&&) { arrived.push_back(loop.now()); }});
  for (const bool change : {false, true}) {
    if (change) {  // a new link model: the tabulated times follow it
      link.bytes_per_ns = 97.1;
      link.inter_node_bytes_per_ns = 0;  // infinite
      transport.set_link(link);
    }
    for (const std::int64_t rows : {0, 1, 2, 7, 255, 256, 257, 1000}) {
      for (const std::int32_t dst : {1, 2}) {  // within node 0, and to node 1
        arrived.clear();
        const std::int64_t start = loop.now();
        transport.send(shipment_of(0, dst, rows));
        loop.run();
        ASSERT_EQ(arrived.size(), 1u);
        const bool remote = dst >= 2;
        const std::int64_t want =
            expected_ns(remote ? link.inter_node_latency_ns : link.latency_ns,
                        remote ? link.inter_node_bytes_per_ns : link.bytes_per_ns, rows * kBytesPerRow);
        EXPECT_EQ(arrived[0] - start, want) << rows << " rows to device " << dst << (change ? " (new link)" : "");
      }
    }
  }
}

// A receiver made by Receiver::of is called directly (its function pointers), one made of
// functions through them: both see every header at its send and every payload at its arrival,
// the held ones once the lane catches up.
struct Recorder {
  std::vector<std::string>* log;
  EventLoop* loop;
  void announce(const ShipmentHeader& h) { log->push_back("h" + std::to_string(h.dst) + "@" + std::to_string(loop->now())); }
  void receive(Shipment&& s) {
    log->push_back("p" + std::to_string(s.dst) + ":" + std::to_string(s.tokens()) + "@" + std::to_string(loop->now()));
  }
  Status check_remote(const ShipmentHeader&) const { return Status::Ok(); }
  Status check_remote(const Shipment&) const { return Status::Ok(); }
};

TEST(LoopTransport, DirectAndFunctionReceiversSeeTheSamePhases) {
  LinkModel link;
  link.latency_ns = 100;
  link.bytes_per_ns = 1;
  link.shared_ports = true;
  std::vector<std::string> logs[2];
  for (int direct = 0; direct < 2; ++direct) {
    VirtualEventLoop loop;
    LoopTransport transport(loop, 3, 10, link, nullptr);
    std::vector<Recorder> recorders(3, Recorder{&logs[direct], &loop});
    for (std::int32_t d = 0; d < 3; ++d) {
      Recorder* r = &recorders[static_cast<std::size_t>(d)];
      if (direct) {
        transport.set_receiver(d, Transport::Receiver::of(r));
      } else {
        transport.set_receiver(d, {[r](const ShipmentHeader& h) { r->announce(h); }, [r](Shipment&& s) { r->receive(std::move(s)); }});
      }
    }
    // Device 2 executes while the first two arrive: its lane holds them until it catches up.
    loop.lane(2)->held = true;
    transport.send(shipment_of(0, 2, 3));
    transport.send(shipment_of(1, 2, 1));
    transport.send(shipment_of(0, 1, 2));
    EXPECT_EQ(transport.in_flight_to(2), 2);
    loop.run_until(1'000);
    loop.catch_up_lane(2);
    loop.lane(2)->held = false;
    loop.release_lane(2);
    loop.run();
    EXPECT_EQ(transport.in_flight_to(2), 0);
    EXPECT_EQ(transport.in_flight_to(1), 0);
  }
  EXPECT_EQ(logs[0], logs[1]);
  EXPECT_EQ(logs[1].size(), 6u);
}

}  // namespace
}  // namespace sy
