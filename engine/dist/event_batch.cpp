#include "engine/dist/event_batch.h"

#include "engine/runtime/layer_id.h"
#include "engine/runtime/runtime_observer.h"

namespace sy::dist {
namespace {

using Kind = RelayedEvent::Kind;

// The shortest record (a stall: kind, device, reason, start, end): a count beyond the bytes
// over this is refused before anything is allocated for it.
constexpr std::size_t kMinEventBytes = 1 + 4 + 4 + 8 + 8;
constexpr std::int64_t kTimeBound = std::int64_t{1} << 62;

}  // namespace

void put_event(ByteWriter& w, const RelayedEvent& e) {
  w.put<std::uint8_t>(static_cast<std::uint8_t>(e.kind));
  w.put<std::int32_t>(e.device);
  switch (e.kind) {
    case Kind::Execution:
      w.put<std::int32_t>(e.other);
      w.put<std::int32_t>(e.block);
      w.put<std::int32_t>(e.index);
      w.put<std::int32_t>(e.group);
      w.put<std::int64_t>(e.tokens);
      break;
    case Kind::Merge:
      w.put<std::int32_t>(e.block);
      w.put<std::int64_t>(e.tokens);
      break;
    case Kind::SharedExpert:
      w.put<std::int32_t>(e.block);
      w.put<std::int32_t>(e.group);
      w.put<std::int64_t>(e.tokens);
      break;
    case Kind::Stall: w.put<std::int32_t>(e.other); break;
    case Kind::Transfer:
      w.put<std::int32_t>(e.other);
      w.put<std::int64_t>(e.tokens);
      w.put<std::int64_t>(e.bytes);
      break;
  }
  w.put<std::int64_t>(e.start);
  w.put<std::int64_t>(e.end);
}

std::string encode_events(std::int32_t rank, std::uint32_t run, std::uint32_t count, std::string_view records) {
  ByteWriter w = message_writer(MessageType::Events);
  w.put<std::int32_t>(rank);
  w.put<std::uint32_t>(run);
  w.put<std::uint32_t>(count);
  w.put_raw(records.data(), records.size());
  return std::move(w.bytes());
}

std::string encode(const EventBatch& batch) {
  ByteWriter records;
  for (const RelayedEvent& e : batch.events) put_event(records, e);
  return encode_events(batch.rank, batch.run, static_cast<std::uint32_t>(batch.events.size()), records.bytes());
}

namespace {

Status get_event(ByteReader& r, RelayedEvent& e) {
  std::uint8_t kind = 0;
  SY_RETURN_IF_ERROR(r.get(kind));
  if (kind > static_cast<std::uint8_t>(Kind::SharedExpert)) return Status::Error("event kind " + std::to_string(kind));
  e.kind = static_cast<Kind>(kind);
  SY_RETURN_IF_ERROR(r.get(e.device));
  switch (e.kind) {
    case Kind::Execution:
      SY_RETURN_IF_ERROR(r.get(e.other));
      SY_RETURN_IF_ERROR(r.get(e.block));
      SY_RETURN_IF_ERROR(r.get(e.index));
      SY_RETURN_IF_ERROR(r.get(e.group));
      SY_RETURN_IF_ERROR(r.get(e.tokens));
      break;
    case Kind::Merge:
      SY_RETURN_IF_ERROR(r.get(e.block));
      SY_RETURN_IF_ERROR(r.get(e.tokens));
      break;
    case Kind::SharedExpert:
      SY_RETURN_IF_ERROR(r.get(e.block));
      SY_RETURN_IF_ERROR(r.get(e.group));
      SY_RETURN_IF_ERROR(r.get(e.tokens));
      break;
    case Kind::Stall: SY_RETURN_IF_ERROR(r.get(e.other)); break;
    case Kind::Transfer:
      SY_RETURN_IF_ERROR(r.get(e.other));
      SY_RETURN_IF_ERROR(r.get(e.tokens));
      SY_RETURN_IF_ERROR(r.get(e.bytes));
      break;
  }
  SY_RETURN_IF_ERROR(r.get(e.start));
  SY_RETURN_IF_ERROR(r.get(e.end));
  if (e.tokens < 0 || e.bytes < 0) return Status::Error("negative tokens or bytes");
  if (e.start < -kTimeBound || e.end > kTimeBound || e.end < e.start)
    return Status::Error("times " + std::to_string(e.start) + " to " + std::to_string(e.end));
  return Status::Ok();
}

}  // namespace

Status decode(ByteReader& r, EventBatch& batch) {
  std::uint32_t n = 0;
  SY_RETURN_IF_ERROR(r.get(batch.rank));
  SY_RETURN_IF_ERROR(r.get(batch.run));
  SY_RETURN_IF_ERROR(r.get(n));
  if (n > r.left() / kMinEventBytes) return Status::Error(std::to_string(n) + " events in " + std::to_string(r.left()) + " bytes");
  batch.events.resize(n);
  for (RelayedEvent& e : batch.events) SY_RETURN_IF_ERROR(get_event(r, e));
  return Status::Ok();
}

bool plausible(const RelayedEvent& e, std::int32_t rank, const Topology& t) {
  const auto device_of_rank = [&](std::int32_t d) { return d >= 0 && d < t.num_devices && t.process_of(d) == rank; };
  const auto block = [&](std::int32_t b) { return b >= 0 && b < t.num_blocks; };
  if (!device_of_rank(e.device)) return false;
  switch (e.kind) {
    case Kind::Execution:
      // Checked before the cast: the enum's 8 bits would take 256 for an attention layer.
      if (e.other < 0 || e.other > static_cast<std::int32_t>(LayerKind::Sampler)) return false;
      switch (static_cast<LayerKind>(e.other)) {
        case LayerKind::Expert: return block(e.block) && e.index >= -1 && e.index < t.num_experts;
        case LayerKind::Attention: return block(e.block) && e.index >= 0 && e.index < t.num_ranks();
        case LayerKind::Sampler: return e.block == t.num_blocks && e.index >= 0 && e.index < t.num_ranks();
      }
      return false;
    case Kind::Merge:
    case Kind::SharedExpert: return block(e.block);
    case Kind::Stall: return e.other >= 0 && e.other <= static_cast<std::int32_t>(StallReason::Weights);
    case Kind::Transfer: return e.other >= 0 && e.other < t.num_devices;
  }
  return false;
}

}  // namespace sy::dist
