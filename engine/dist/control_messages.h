// The messages that hold a deployment's ranks together, besides shipments, events and the
// attention messages (docs/wire-format.md, types 20–25 and 31): the safe-point protocol (Drain,
// Drained, Apply, Applied), heartbeats and NCCL link refusals. Apart from their handlers, so
// that their checks can be tested and fuzzed on their own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"
#include "engine/dist/wire_format.h"
#include "engine/runtime/placement.h"
#include "engine/runtime/runtime_policy.h"

namespace sy::dist {

struct DrainRequest {
  std::uint64_t epoch = 0;
  bool operator==(const DrainRequest&) const = default;
};

struct DrainAnswer {
  std::uint64_t epoch = 0;
  std::int32_t rank = 0;
  bool quiescent = false;
  std::uint64_t sent = 0;      // messages sent to other ranks
  std::uint64_t received = 0;  // and received from them
  bool operator==(const DrainAnswer&) const = default;
};

struct ApplyChange {
  std::uint64_t epoch = 0;
  RuntimePolicy policy;
  std::optional<Placement> placement;
};

struct ApplyAnswer {
  std::uint64_t epoch = 0;
  bool operator==(const ApplyAnswer&) const = default;
};

// NTP's four times, two of which travel: the sender's send time, and the send time of the last
// beat it heard from the receiver with its arrival (sender's clock; -1 and 0: none yet).
struct Heartbeat {
  std::int32_t rank = 0;
  std::uint32_t run = 0;
  std::int64_t sent = 0;
  std::int64_t echoed_sent = -1;
  std::int64_t echoed_arrival = 0;
  bool operator==(const Heartbeat&) const = default;
};
// A heartbeat's size: ProcessLinks recognises beats by it before anything else is read.
inline constexpr std::size_t kHeartbeatBytes = 1 + 4 + 4 + 8 + 8 + 8;

struct LinkRefusal {
  std::int32_t rank = 0;  // the refusing rank
  std::string why;
  bool operator==(const LinkRefusal&) const = default;
};

// Each encoder writes the whole message, type byte first; each decoder reads the body after the
// type byte and refuses a truncated message or a field no rank sends (a negative rank, a
// heartbeat time no clock gives). A placement is read against the deployment's `shape`.
std::string encode(const DrainRequest& m);
std::string encode(const DrainAnswer& m);
std::string encode(const ApplyChange& m);
std::string encode(const ApplyAnswer& m);
std::string encode(const Heartbeat& m);
std::string encode(const LinkRefusal& m);
Status decode(ByteReader& r, DrainRequest& m);
Status decode(ByteReader& r, DrainAnswer& m);
Status decode(ByteReader& r, const Placement& shape, ApplyChange& m);
Status decode(ByteReader& r, ApplyAnswer& m);
Status decode(ByteReader& r, Heartbeat& m);
Status decode(ByteReader& r, LinkRefusal& m);

}  // namespace sy::dist
