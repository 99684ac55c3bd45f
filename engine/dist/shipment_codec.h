// A shipment's two phases as messages between processes (docs/wire-format.md): the header
// (phase 1) and the payload (phase 2: every batch's metadata columns and its activation rows,
// copied to host memory by the backend that owns them and, on arrival, into memory of the
// receiving backend's: ActivationOps::copy_to_host and allocate_from_host, so the codec is the
// same for host (cpu) and GPU (cuda) activations).
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "engine/dist/wire_format.h"
#include "engine/runtime/activation_ops.h"
#include "engine/runtime/transport.h"

namespace sy::dist {

void encode_header(ByteWriter& w, const ShipmentHeader& header);
Status decode_header(ByteReader& r, ShipmentHeader& header);

// The rows' floats are read through their owner's copy_to_host; null ones travel as none. With
// `rows_over_link` the message carries every batch's shape but not its floats, which the sender
// passes to DeviceLinks::send right after queuing this message, in batch order.
void encode_payload(ByteWriter& w, const Shipment& shipment, bool rows_over_link = false);

// Where the rows of a shipment for device `dst` arrive: that backend's activation operations,
// or null when this process has no such device (the payload is refused).
using ArrivalOps = std::function<ActivationOps*(std::int32_t dst)>;

// Rows arrive in activations allocated by allocate_from_host of `arrivals(dst)`; `oldest_ns`
// becomes `now` (clocks of different processes do not compare). A payload whose rows come over
// a device link gets activations of allocate() instead, not yet filled, listed in batch order
// in `over_link` for DeviceLinks::receive; without `over_link` such a payload is refused.
Status decode_payload(ByteReader& r, const ArrivalOps& arrivals, std::int64_t now, Shipment& shipment,
                      std::vector<Activations*>* over_link = nullptr);
// The same with every shipment's rows from `ops` (the cpu backend's host memory, tests).
Status decode_payload(ByteReader& r, ActivationOps& ops, std::int64_t now, Shipment& shipment);

}  // namespace sy::dist
