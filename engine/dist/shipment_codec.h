// A shipment's two phases as messages between processes (docs/wire-format.md): the header
// (phase 1) and the payload (phase 2: every batch's metadata columns and its activation rows,
// copied out of and into host memory: the cpu backend's activations).
#pragma once

#include <vector>

#include "base/status.h"
#include "engine/cpu/host_activation_ops.h"
#include "engine/dist/wire_format.h"
#include "engine/runtime/transport.h"

namespace sy::dist {

void encode_header(ByteWriter& w, const ShipmentHeader& header);
Status decode_header(ByteReader& r, ShipmentHeader& header);

// Host activations only (the rows' floats are read from host memory); null ones travel as none.
void encode_payload(ByteWriter& w, const Shipment& shipment);
// Rows arrive in activations allocated from `ops` (the receiving process's host memory);
// `oldest_ns` becomes `now` (clocks of different processes do not compare).
Status decode_payload(ByteReader& r, HostActivationOps& ops, std::int64_t now, Shipment& shipment);

}  // namespace sy::dist
