#include "engine/dist/zmq_transport.h"

#include <cstdio>

#include "engine/dist/control_messages.h"
#include "engine/dist/shipment_codec.h"

namespace sy::dist {
namespace {

// One pool for the rows every transport of this process receives. Never freed: handles of it
// may outlive a transport (token pools, recycled batches) until the process exits, and a
// command that serves several deployments (bench) reuses its buffers.
HostActivationOps* arrival_pool() {
  static HostActivationOps* pool = new HostActivationOps;
  return pool;
}

}  // namespace

ZmqTransport::ZmqTransport(EventLoop& loop, std::int32_t num_devices, std::int64_t bytes_per_row, LinkModel link,
                           RuntimeObserver* observer, std::vector<std::int32_t> device_process, ProcessLinks& links,
                           DeviceLinks* device_links)
    : loop_(loop),
      bytes_per_row_(bytes_per_row),
      observer_(observer),
      device_process_(std::move(device_process)),
      links_(links),
      device_links_(device_links),
      local_(loop, num_devices, bytes_per_row, link, observer),
      receivers_(static_cast<std::size_t>(num_devices)),
      remote_in_flight_(static_cast<std::size_t>(num_devices), 0),
      arrivals_(arrival_pool()),
      device_arrivals_(static_cast<std::size_t>(num_devices), arrivals_),
      refused_from_(static_cast<std::size_t>(links.world()), false) {
  links_.on(MessageType::Header, [this](ByteReader& r) {
    ShipmentHeader h;
    Status s = decode_header(r, h);
    if (s.ok() && !runs(h.dst)) s = Status::Error("it is addressed to device " + std::to_string(h.dst) + ", which this process does not run");
    if (!s.ok()) {
      std::fprintf(stderr, "switchyard: rank %d: bad shipment header: %s\n", links_.rank(), s.message().c_str());
      return;
    }
    loop_.post_external([this, h] {
      const Receiver& rc = receivers_[static_cast<std::size_t>(h.dst)];
      // Against the device's state now (its placement changes on the loop).
      if (rc.check_header)
        if (const Status bad = rc.check_header(h); !bad.ok())
          return (void)std::fprintf(stderr, "switchyard: rank %d: bad shipment header: %s\n", links_.rank(),
                                    bad.message().c_str());
      ++remote_in_flight_[static_cast<std::size_t>(h.dst)];
      if (rc.on_header) rc.on_header(h);
    });
  });
  links_.on(MessageType::Payload, [this](ByteReader& r) {
    auto s = std::make_shared<Shipment>();
    s->src = -1;  // still -1 after a refusal: the message did not say where it came from
    const auto arrivals = [this](std::int32_t dst) -> ActivationOps* {
      return runs(dst) ? device_arrivals_[static_cast<std::size_t>(dst)] : nullptr;
    };
    std::vector<Activations*> over_link;
    const Status st = decode_payload(r, arrivals, loop_.now(), *s, device_links_ ? &over_link : nullptr);
    // The decoder checks dst (against this process's devices), not src, which picks the link
    // (an unknown one would index past device_process_ or throw from the links' map).
    const bool known = s->src >= 0 && s->src < static_cast<std::int32_t>(device_process_.size());
    const std::int32_t from = known ? device_process_[static_cast<std::size_t>(s->src)] : -1;
    const bool linked = device_links_ && from >= 0 && from != links_.rank() && device_links_->linked(from);
    if (!st.ok()) {
      std::fprintf(stderr, "switchyard: rank %d: bad shipment payload: %s\n", links_.rank(), st.message().c_str());
      // Rows the sender may have posted on the link are never received, so the link is out of
      // step for good: tell the sender (its send would otherwise wait out the bootstrap
      // timeout), and receive nothing more from it over the link.
      if (linked) refuse(from, "rank " + std::to_string(links_.rank()) + " refused a payload from device " +
                                 std::to_string(s->src) + ": " + st.message());
      return;
    }
    // The rows follow over the device link: the sender passed them to its send() right after
    // queuing this message, and messages and link transfers from one rank keep one order, so
    // this receive matches that send (docs/architecture.md). Here, on the network thread,
    // never on the loop: the sender's loop waits for it, and ours may be sending to them.
    if (!over_link.empty()) {
      if (!linked) {
        std::fprintf(stderr, "switchyard: rank %d: bad shipment payload: rows over a device link from device %d, "
                     "which no link of this rank reaches\n", links_.rank(), s->src);
        return;
      }
      if (refused_from_[static_cast<std::size_t>(from)]) return;  // out of step since a refusal
      // While it waits, heartbeats keep going both ways and a dead sender is found (pump).
      if (!device_links_->receive(from, over_link, [this] { links_.pump(); })) return;  // sender dead: dropped
    }
    loop_.post_external([this, s] {
      const auto dst = static_cast<std::size_t>(s->dst);
      const Receiver& rc = receivers_[dst];
      if (remote_in_flight_[dst] > 0) --remote_in_flight_[dst];  // a header-less payload is refused below
      if (rc.check_payload)
        if (const Status bad = rc.check_payload(*s); !bad.ok())
          return (void)std::fprintf(stderr, "switchyard: rank %d: bad shipment payload: %s\n", links_.rank(),
                                    bad.message().c_str());
      ++received_remote_;
      rc.on_payload(std::move(*s));
    });
  });
  if (device_links_)
    links_.on(
        MessageType::LinkRefused,
        [this](ByteReader& r) {
          LinkRefusal m;
          if (const Status s = decode(r, m); !s.ok() || m.rank >= links_.world() || !device_links_->linked(m.rank)) {
            std::fprintf(stderr, "switchyard: rank %d: bad link refusal\n", links_.rank());
            return;
          }
          device_links_->peer_fault(m.rank, PeerState::Refused, m.why);
        },
        /*urgent=*/true);
}

void ZmqTransport::refuse(std::int32_t from, const std::string& why) {
  refused_from_[static_cast<std::size_t>(from)] = true;
  // ProcessLinks::send is the loop's, so through the loop: at worst after a link send of ours
  // that is in flight, which `from`'s network thread receives meanwhile.
  loop_.post_external([this, from, message = encode(LinkRefusal{links_.rank(), why})] { links_.send(from, message); });
}

TransportFactory ZmqTransport::factory(ProcessLinks& links, std::vector<std::int32_t> device_process,
                                       std::int64_t bytes_per_row, LinkModel link, DeviceLinks* device_links) {
  return [&links, device_process, bytes_per_row, link, device_links](EventLoop& loop, std::int32_t num_devices,
                                                                      RuntimeObserver* observer) {
    return std::unique_ptr<Transport>(std::make_unique<ZmqTransport>(loop, num_devices, bytes_per_row, link, observer,
                                                                     device_process, links, device_links));
  };
}

void ZmqTransport::set_arrivals(std::int32_t device, ActivationOps* ops) {
  device_arrivals_[static_cast<std::size_t>(device)] = ops ? ops : arrivals_;
}

void ZmqTransport::set_receiver(std::int32_t device, Receiver receiver) {
  receivers_[static_cast<std::size_t>(device)] = receiver;
  local_.set_receiver(device, std::move(receiver));
}

std::int32_t ZmqTransport::in_flight_to(std::int32_t device) const {
  return local_.in_flight_to(device) + remote_in_flight_[static_cast<std::size_t>(device)];
}

void ZmqTransport::send(Shipment&& shipment) {
  const std::int32_t process = device_process_[static_cast<std::size_t>(shipment.dst)];
  if (process == links_.rank()) return local_.send(std::move(shipment));
  const std::int64_t tokens = shipment.tokens();
  const std::int64_t bytes = tokens * bytes_per_row_;
  const std::int64_t now = loop_.now();
  ByteWriter header;
  header.put<std::uint8_t>(static_cast<std::uint8_t>(MessageType::Header));
  encode_header(header, ShipmentHeader{shipment.src, shipment.dst, shipment.kind, shipment.block, shipment.group,
                                       tokens, bytes});
  links_.send(process, header.bytes());
  // Not to a rank found dead: its message was dropped, and nothing would take the rows.
  const bool over_link = device_links_ && device_links_->linked(process) && !links_.forgotten(process);
  ByteWriter payload;
  payload.put<std::uint8_t>(static_cast<std::uint8_t>(MessageType::Payload));
  encode_payload(payload, shipment, over_link);
  links_.send(process, payload.bytes());
  if (over_link) {
    // After the message that describes them (queued, never blocking), so that the receiver,
    // which posts its receive when that message arrives, can always match this send.
    outgoing_.clear();
    for (const TokenBatch& b : shipment.batches)
      if (!b.hidden.null() && b.hidden.rows() > 0) outgoing_.push_back(&b.hidden);
    // False: the peer was found dead and the rows are dropped, as a message to it would be.
    if (!outgoing_.empty()) (void)device_links_->send(process, outgoing_);
  }
  ++sent_remote_;
  // The sender knows when the bytes left, not when they land: a transfer of no duration.
  if (observer_ && tokens > 0) observer_->on_transfer(shipment.src, shipment.dst, tokens, bytes, now, now);
  // The rows' activations go back to their pools here, as a delivery would have released them.
  shipment.batches.clear();
}

}  // namespace sy::dist
