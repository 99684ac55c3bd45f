#include "engine/runtime/loop_transport.h"

#include <algorithm>

namespace sy {

LoopTransport::LoopTransport(EventLoop& loop, std::int32_t num_devices, std::int64_t bytes_per_row,
                             LinkModel link, RuntimeObserver* observer)
    : loop_(loop),
      virtual_loop_(dynamic_cast<VirtualEventLoop*>(&loop)),
      bytes_per_row_(bytes_per_row),
      link_(link),
      observer_(observer),
      jitter_(link.jitter_seed),
      receivers_(static_cast<std::size_t>(num_devices)),
      receptors_(static_cast<std::size_t>(num_devices)),
      in_flight_(static_cast<std::size_t>(num_devices), 0),
      egress_free_(static_cast<std::size_t>(num_devices), 0),
      ingress_free_(static_cast<std::size_t>(num_devices), 0) {
  for (std::size_t d = 0; d < receptors_.size(); ++d) receptors_[d] = through_functions(d);
  index_nodes();
}

void LoopTransport::index_nodes() {
  node_.resize(receivers_.size());
  for (std::size_t d = 0; d < node_.size(); ++d)
    node_[d] = link_.devices_per_node > 0 ? static_cast<std::int32_t>(d) / link_.devices_per_node : 0;
  for (int remote = 0; remote < 2; ++remote) {
    const double bw = remote ? link_.inter_node_bytes_per_ns : link_.bytes_per_ns;
    wire_ns_[remote].resize(static_cast<std::size_t>(kWireRows));
    for (std::int64_t rows = 0; rows < kWireRows; ++rows)
      wire_ns_[remote][static_cast<std::size_t>(rows)] = wire_of(bw, rows * bytes_per_row_);
  }
}

void LoopTransport::set_receiver(std::int32_t device, Receiver receiver) {
  const auto d = static_cast<std::size_t>(device);
  receivers_[d] = std::move(receiver);
  const Receiver& r = receivers_[d];
  if (r.header_fn && r.payload_fn) {
    receptors_[d] = {r.target, r.header_fn, r.payload_fn};
  } else {
    receptors_[d] = through_functions(d);
  }
}

LoopTransport::Receptor LoopTransport::through_functions(std::size_t device) {
  // The target is the stored receiver (receivers_ never grows after construction).
  return {&receivers_[device],
          [](void* o, const ShipmentHeader& h) {
            if (const Receiver& r = *static_cast<const Receiver*>(o); r.on_header) r.on_header(h);
          },
          [](void* o, Shipment&& s) { static_cast<const Receiver*>(o)->on_payload(std::move(s)); }};
}

TransportFactory LoopTransport::factory(std::int64_t bytes_per_row, LinkModel link) {
  return [bytes_per_row, link](EventLoop& loop, std::int32_t num_devices, RuntimeObserver* observer) {
    return std::unique_ptr<Transport>(std::make_unique<LoopTransport>(loop, num_devices, bytes_per_row, link, observer));
  };
}

void LoopTransport::send(Shipment&& shipment) {
  const std::int32_t src = shipment.src;
  const std::int32_t dst = shipment.dst;
  const std::int64_t now = loop_.now();
  std::int64_t wire_start = now;  // when the bytes start to leave (after the ports free up)
  std::int64_t arrival = now;
  const std::int64_t tokens = shipment.tokens();
  const std::int64_t bytes = tokens * bytes_per_row_;
  if (src != dst) {
    const bool remote = node_[src] != node_[dst];
    const std::int64_t wire = wire_ns(remote, tokens, bytes);
    if (link_.shared_ports) {
      // The bytes go out once both ports are free; each stays busy for the wire time.
      wire_start = std::max({now, egress_free_[src], ingress_free_[dst]});
      egress_free_[src] = ingress_free_[dst] = wire_start + wire;
    }
    arrival = wire_start + (remote ? link_.inter_node_latency_ns : link_.latency_ns) + wire;
    if (link_.max_jitter_ns > 0) arrival += static_cast<std::int64_t>(jitter_() % static_cast<std::uint64_t>(link_.max_jitter_ns + 1));
    if (observer_) observer_->on_transfer(src, dst, tokens, bytes, wire_start, arrival);
  }
  // Phase 1: the receiver knows at once what is on its way.
  ++in_flight_[dst];
  const Receptor& rc = receptors_[static_cast<std::size_t>(dst)];
  rc.header(rc.target, ShipmentHeader{src, dst, shipment.kind, shipment.block, shipment.group, tokens, bytes});
  std::uint32_t slot;
  if (free_.empty()) {
    slot = slots_++;
    if ((slot >> kChunkBits) == parked_.size()) parked_.push_back(std::make_unique<Shipment[]>(1u << kChunkBits));
  } else {
    slot = free_.back();
    free_.pop_back();
  }
  parked(slot) = std::move(shipment);
  // On the receiver's lane: a virtual loop may hold it while the receiver executes.
  if (virtual_loop_) {
    virtual_loop_->post_call_to(dst, arrival, &LoopTransport::deliver, this, slot);
  } else {
    loop_.post_call_to(dst, arrival, &LoopTransport::deliver, this, slot);
  }
}

void LoopTransport::deliver(void* transport, std::uint64_t slot) {
  auto& self = *static_cast<LoopTransport*>(transport);
  const auto at = static_cast<std::uint32_t>(slot);
  Shipment& s = self.parked(at);
  const std::int32_t dst = s.dst;
  --self.in_flight_[dst];
  // The receiver takes what it keeps (a worker: the rows and the list of batches); batches it
  // left are let go here, as a moved-out shipment's were. The slot is free only after: a send
  // from within the receiver must not park into it.
  const Receptor& rc = self.receptors_[static_cast<std::size_t>(dst)];
  rc.payload(rc.target, std::move(s));
  self.parked(at).batches.clear();
  self.free_.push_back(at);
}

}  // namespace sy
