// The in-process transport: the "wire" is the event loop. Phase 1 is known to the receiver at
// once (in one process the metadata needs no message); the payload is delivered after the
// α + bytes/β of the link it crosses, moved, never copied.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "engine/runtime/transport.h"
#include "engine/runtime/virtual_event_loop.h"

namespace sy {

// α + β·bytes between distinct devices, zero within a device; an optional seeded jitter
// reorders arrivals (tests use it to shuffle arrival orders deterministically).
struct LinkModel {
  std::int64_t latency_ns = 0;
  double bytes_per_ns = 0;          // 0: infinite bandwidth
  std::int64_t max_jitter_ns = 0;
  std::uint64_t jitter_seed = 0;
  // Multi-node clusters: devices [n·devices_per_node, (n+1)·devices_per_node) share node n
  // and talk over the link above (NVLink); between nodes the network's α and β apply.
  // 0: every device on one node.
  std::int32_t devices_per_node = 0;
  std::int64_t inter_node_latency_ns = 0;
  double inter_node_bytes_per_ns = 0;
  // Bandwidth belongs to a device's port, not to a pair: transfers leaving one device (and
  // those arriving at one) queue behind each other. Off: every pair has the full bandwidth.
  bool shared_ports = false;
};

class LoopTransport final : public Transport {
 public:
  LoopTransport(EventLoop& loop, std::int32_t num_devices, std::int64_t bytes_per_row, LinkModel link,
                RuntimeObserver* observer);
  // A factory for deployments whose devices all live on one loop.
  static TransportFactory factory(std::int64_t bytes_per_row, LinkModel link);

  void set_receiver(std::int32_t device, Receiver receiver) override;
  void set_link(const LinkModel& link) {
    link_ = link;
    index_nodes();
  }

  void send(Shipment&& shipment) override;
  std::int32_t in_flight_to(std::int32_t device) const override { return in_flight_[device]; }

 private:
  // The arrival event of parked shipment `slot`: phase 2.
  static void deliver(void* transport, std::uint64_t slot);
  // Fills node_ from the link's devices per node, and wire_ns_ from its bandwidths.
  void index_nodes();

  EventLoop& loop_;
  // The same loop where it is a virtual one (the simulator, virtual cpu clocks): its lanes' post
  // is then a direct call, inlined, instead of a virtual one per shipment.
  VirtualEventLoop* virtual_loop_;
  std::int64_t bytes_per_row_;
  LinkModel link_;
  RuntimeObserver* observer_;
  std::mt19937_64 jitter_;
  std::vector<Receiver> receivers_;
  // [device]: its receiver's two phases as plain calls (Receiver::header_fn and payload_fn, or
  // calls into its functions where it has none): one indirect call per phase.
  struct Receptor {
    void* target = nullptr;
    void (*header)(void*, const ShipmentHeader&) = nullptr;
    void (*payload)(void*, Shipment&&) = nullptr;
  };
  std::vector<Receptor> receptors_;
  Receptor through_functions(std::size_t device);
  // [device]: the node it sits on (all 0 on one node): two divisions per shipment otherwise.
  std::vector<std::int32_t> node_;
  // The wire time of a shipment of r < kWireRows rows, within a node [0] and between nodes [1],
  // computed as send computes a larger one: a table lookup instead of a conversion and a
  // division per shipment (most carry a few rows).
  static constexpr std::int64_t kWireRows = 256;
  std::vector<std::int64_t> wire_ns_[2];
  std::int64_t wire_ns(bool remote, std::int64_t rows, std::int64_t bytes) const {
    if (rows < kWireRows) return wire_ns_[remote][static_cast<std::size_t>(rows)];
    return wire_of(remote ? link_.inter_node_bytes_per_ns : link_.bytes_per_ns, bytes);
  }
  static std::int64_t wire_of(double bytes_per_ns, std::int64_t bytes) {
    return bytes_per_ns > 0 ? static_cast<std::int64_t>(static_cast<double>(bytes) / bytes_per_ns) : 0;
  }
  std::vector<std::int32_t> in_flight_;
  std::vector<std::int64_t> egress_free_;   // shared_ports: when each device's send port frees
  std::vector<std::int64_t> ingress_free_;  // and its receive port
  // Shipments on a link, parked until delivery; a free list keeps their slots (and the event
  // callbacks, which capture only a slot index) free of allocation. The receiver is handed the
  // parked shipment itself (no move out and no destructor per delivery), so slots live in
  // chunks that never move: a receiver may send, and parking a new shipment then must not move
  // the one it is reading.
  static constexpr std::uint32_t kChunkBits = 8;
  Shipment& parked(std::uint32_t slot) {
    return parked_[slot >> kChunkBits][slot & ((1u << kChunkBits) - 1)];
  }
  std::vector<std::unique_ptr<Shipment[]>> parked_;
  std::uint32_t slots_ = 0;  // slots made so far, in parked_'s chunks
  std::vector<std::uint32_t> free_;
};

}  // namespace sy
