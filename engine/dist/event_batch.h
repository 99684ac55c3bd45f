// The Events message (docs/wire-format.md, type 26): a rank's runtime events, batched for rank
// 0's observers. Its codec, apart from the relay that sends it, so that the decoder's checks
// can be tested and fuzzed on their own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/dist/wire_format.h"
#include "engine/runtime/topology.h"

namespace sy::dist {

struct RelayedEvent {
  enum class Kind : std::uint8_t { Execution = 0, Merge = 1, Stall = 2, Transfer = 3, SharedExpert = 4 };
  Kind kind = Kind::Execution;
  std::int32_t device = 0;  // transfer: source
  std::int32_t other = 0;   // execution: layer kind; stall: reason; transfer: destination
  std::int32_t block = 0;   // execution, merge, shared expert
  std::int32_t index = 0;   // execution
  std::int32_t group = 0;   // execution, shared expert
  std::int64_t tokens = 0;  // all but stall
  std::int64_t bytes = 0;   // transfer
  std::int64_t start = 0;   // on rank 0's clock
  std::int64_t end = 0;
  bool operator==(const RelayedEvent&) const = default;
};

struct EventBatch {
  std::int32_t rank = 0;
  std::uint32_t run = 0;
  std::vector<RelayedEvent> events;
  bool operator==(const EventBatch&) const = default;
};

// The record of one event as it follows the batch's header (no type byte, rank, run or count):
// the relay appends these as events happen.
void put_event(ByteWriter& w, const RelayedEvent& e);
// The whole message, type byte first: `count` records written by put_event as `records` (the
// relay's buffer), or a batch's.
std::string encode_events(std::int32_t rank, std::uint32_t run, std::uint32_t count, std::string_view records);
std::string encode(const EventBatch& batch);

// Reads the body after the type byte. Refuses a truncated batch, a count its bytes cannot hold,
// an unknown kind, negative tokens or bytes, an end before its start and a time beyond ±2⁶²
// (no clock gives one; the observers subtract them).
Status decode(ByteReader& r, EventBatch& batch);

// Whether rank `rank`'s event names what it runs and what the deployment has: one of its own
// devices, blocks, layers, ranks and stall reasons of `topology` (the observers index their
// tables by these numbers).
bool plausible(const RelayedEvent& e, std::int32_t rank, const Topology& topology);

}  // namespace sy::dist
