#include "engine/dist/shipment_codec.h"

namespace sy::dist {
namespace {

Status get_kind(ByteReader& r, LayerKind& kind) {
  std::uint8_t k = 0;
  SY_RETURN_IF_ERROR(r.get(k));
  if (k > static_cast<std::uint8_t>(LayerKind::Sampler)) return Status::Error("unknown layer kind " + std::to_string(k));
  kind = static_cast<LayerKind>(k);
  return Status::Ok();
}

}  // namespace

void encode_header(ByteWriter& w, const ShipmentHeader& h) {
  w.put<std::int32_t>(h.src);
  w.put<std::int32_t>(h.dst);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(h.kind));
  w.put<std::int32_t>(h.block);
  w.put<std::int32_t>(h.group);
  w.put<std::int64_t>(h.rows);
  w.put<std::int64_t>(h.bytes);
}

Status decode_header(ByteReader& r, ShipmentHeader& h) {
  SY_RETURN_IF_ERROR(r.get(h.src));
  SY_RETURN_IF_ERROR(r.get(h.dst));
  SY_RETURN_IF_ERROR(get_kind(r, h.kind));
  SY_RETURN_IF_ERROR(r.get(h.block));
  SY_RETURN_IF_ERROR(r.get(h.group));
  SY_RETURN_IF_ERROR(r.get(h.rows));
  return r.get(h.bytes);
}

void encode_payload(ByteWriter& w, const Shipment& s, bool rows_over_link) {
  w.put<std::int32_t>(s.src);
  w.put<std::int32_t>(s.dst);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(s.kind));
  w.put<std::int32_t>(s.block);
  w.put<std::int32_t>(s.group);
  w.put<std::uint8_t>(rows_over_link ? 1 : 0);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(s.batches.size()));
  for (const TokenBatch& b : s.batches) {
    w.put<std::uint8_t>(static_cast<std::uint8_t>(b.layer.kind));
    w.put<std::int32_t>(b.layer.block);
    w.put<std::int32_t>(b.layer.index);
    w.put<std::int32_t>(b.group);
    w.put_array(b.request);
    w.put_array(b.position);
    w.put_array(b.rank);
    w.put_array(b.token);
    w.put_array(b.slot);
    w.put_array(b.weight);
    const bool rows = !b.hidden.null() && b.hidden.rows() > 0;
    w.put<std::int64_t>(rows ? b.hidden.rows() : 0);
    w.put<std::int64_t>(rows ? b.hidden.width() : 0);
    if (rows && !rows_over_link)
      b.hidden.owner().copy_to_host(
          b.hidden, w.put_space(static_cast<std::size_t>(b.hidden.rows() * b.hidden.width()) * sizeof(float)));
  }
}

Status decode_payload(ByteReader& r, ActivationOps& ops, std::int64_t now, Shipment& s) {
  return decode_payload(r, [&ops](std::int32_t) { return &ops; }, now, s);
}

Status decode_payload(ByteReader& r, const ArrivalOps& arrivals, std::int64_t now, Shipment& s,
                      std::vector<Activations*>* over_link) {
  SY_RETURN_IF_ERROR(r.get(s.src));
  SY_RETURN_IF_ERROR(r.get(s.dst));
  ActivationOps* ops = arrivals(s.dst);
  if (!ops) return Status::Error("a shipment for device " + std::to_string(s.dst) + ", which this process does not run");
  SY_RETURN_IF_ERROR(get_kind(r, s.kind));
  SY_RETURN_IF_ERROR(r.get(s.block));
  SY_RETURN_IF_ERROR(r.get(s.group));
  std::uint8_t linked = 0;
  SY_RETURN_IF_ERROR(r.get(linked));
  if (linked > 1) return Status::Error("rows travel in an unknown way (" + std::to_string(linked) + ")");
  if (linked == 1 && !over_link)
    return Status::Error("rows over a device link from device " + std::to_string(s.src) + ", which this process has not");
  std::uint32_t n = 0;
  SY_RETURN_IF_ERROR(r.get(n));
  if (n > r.left()) return Status::Error("message truncated");
  s.batches.resize(n);
  for (TokenBatch& b : s.batches) {
    SY_RETURN_IF_ERROR(get_kind(r, b.layer.kind));
    SY_RETURN_IF_ERROR(r.get(b.layer.block));
    SY_RETURN_IF_ERROR(r.get(b.layer.index));
    SY_RETURN_IF_ERROR(r.get(b.group));
    b.oldest_ns = now;
    SY_RETURN_IF_ERROR(r.get_array(b.request));
    SY_RETURN_IF_ERROR(r.get_array(b.position));
    SY_RETURN_IF_ERROR(r.get_array(b.rank));
    SY_RETURN_IF_ERROR(r.get_array(b.token));
    SY_RETURN_IF_ERROR(r.get_array(b.slot));
    SY_RETURN_IF_ERROR(r.get_array(b.weight));
    const std::size_t rows = b.request.size();
    // Each kind of batch carries the columns its receiver reads (TokenBatch): expert rows a
    // rank, a slot and a weight (the expert dispatch and the expert read them; no position, no
    // token); expert outputs (rows bound for an attention or sampler layer with a top-k slot
    // each) a slot only, for the token pool; other rows a position and a rank, and block 0's
    // a token.
    if (b.layer.kind == LayerKind::Expert) {
      if (b.rank.size() != rows || b.slot.size() != rows || b.weight.size() != rows || !b.position.empty() ||
          !b.token.empty())
        return Status::Error("an expert batch's rows need a rank, a slot and a weight each, and no position or token");
    } else if (!b.slot.empty()) {
      if (b.slot.size() != rows || !b.position.empty() || !b.rank.empty() || !b.token.empty() || !b.weight.empty())
        return Status::Error("an expert output batch's rows need a request and a slot each, and nothing else");
    } else if (b.position.size() != rows || b.rank.size() != rows || (!b.weight.empty() && b.weight.size() != rows) ||
               (!b.token.empty() && b.token.size() != rows)) {
      return Status::Error("a batch's columns differ in length");
    }
    std::int64_t hidden_rows = 0, width = 0;
    SY_RETURN_IF_ERROR(r.get(hidden_rows));
    SY_RETURN_IF_ERROR(r.get(width));
    if (hidden_rows == 0) continue;
    if (hidden_rows != static_cast<std::int64_t>(rows) || width <= 0 || width > (1 << 20))
      return Status::Error("activations of " + std::to_string(hidden_rows) + " x " + std::to_string(width) +
                           " for a batch of " + std::to_string(rows) + " rows");
    if (linked == 1) {
      b.hidden = ops->allocate(hidden_rows, width);
      continue;
    }
    const auto bytes = static_cast<std::size_t>(hidden_rows * width) * sizeof(float);
    if (r.left() < bytes) return Status::Error("message truncated");
    b.hidden = ops->allocate_from_host(r.here(), hidden_rows, width);
    r.advance(bytes);
  }
  // Pointers into the batches only now that the vector no longer grows.
  if (linked == 1)
    for (TokenBatch& b : s.batches)
      if (!b.hidden.null()) over_link->push_back(&b.hidden);
  return Status::Ok();
}

}  // namespace sy::dist
