#include "engine/runtime/transport.h"

#include <memory>

namespace sy {

std::string_view stall_reason_name(StallReason reason) {
  switch (reason) {
    case StallReason::QueueEmpty: return "queue_empty";
    case StallReason::Barrier: return "barrier";
    case StallReason::Transfer: return "transfer";
  }
  return "?";
}

LoopTransport::LoopTransport(EventLoop& loop, std::int32_t num_devices, std::int64_t bytes_per_row,
                             LinkModel link, RuntimeObserver* observer)
    : loop_(loop),
      bytes_per_row_(bytes_per_row),
      link_(link),
      observer_(observer),
      jitter_(link.jitter_seed),
      receivers_(static_cast<std::size_t>(num_devices)),
      in_flight_(static_cast<std::size_t>(num_devices), 0) {}

void LoopTransport::send(Shipment&& shipment) {
  const std::int32_t dst = shipment.dst;
  const std::int64_t start = loop_.now();
  std::int64_t delay = 0;
  const std::int64_t tokens = shipment.tokens();
  const std::int64_t bytes = tokens * bytes_per_row_;
  if (shipment.src != dst) {
    delay = link_.latency_ns;
    if (link_.bytes_per_ns > 0) delay += static_cast<std::int64_t>(static_cast<double>(bytes) / link_.bytes_per_ns);
    if (link_.max_jitter_ns > 0) delay += static_cast<std::int64_t>(jitter_() % static_cast<std::uint64_t>(link_.max_jitter_ns + 1));
  }
  if (observer_ && shipment.src != dst) observer_->on_transfer(shipment.src, dst, tokens, bytes, start, start + delay);
  ++in_flight_[dst];
  // std::function needs a copyable callable: park the shipment on the heap.
  auto parcel = std::make_shared<Shipment>(std::move(shipment));
  loop_.post(start + delay, [this, dst, parcel] {
    --in_flight_[dst];
    receivers_[dst](std::move(*parcel));
  });
}

}  // namespace sy
