#include "engine/dist/shipment_codec.h"

#include <cstring>

namespace sy::dist {
namespace {

Status get_kind(ByteReader& r, LayerKind& kind) {
  std::uint8_t k = 0;
  SY_RETURN_IF_ERROR(r.get(k));
  if (k > static_cast<std::uint8_t>(LayerKind::Sampler)) return Status::Error("unknown layer kind " + std::to_string(k));
  kind = static_cast<LayerKind>(k);
  return Status::Ok();
}

// A field of every row, written as the wire's array of it: its length, then the values.
template <class T>
void put_column(ByteWriter& w, const TokenBatch& b, T TokenRow::*field) {
  const std::size_t n = b.row.size();
  w.put<std::uint64_t>(n);
  char* out = w.put_space(n * sizeof(T));
  for (const TokenRow& row : b.row) {
    std::memcpy(out, &(row.*field), sizeof(T));
    out += sizeof(T);
  }
}
// The same for a column the batch may lack: an empty array then.
template <class T>
void put_column(ByteWriter& w, const TokenBatch& b, TokenColumn column, T TokenRow::*field) {
  if (b.has(column)) {
    put_column(w, b, field);
  } else {
    w.put<std::uint64_t>(0);
  }
}

// The columns of one batch as the wire holds them, before they are checked.
struct Columns {
  std::vector<std::int64_t> request;
  std::vector<std::int32_t> position, rank, token, slot;
  std::vector<float> weight;
  std::vector<std::int32_t> entry;
};
// Stores a checked column (empty, or one value per row) into the rows' field.
template <class T>
void get_column(TokenBatch& b, const std::vector<T>& values, std::uint8_t column, T TokenRow::*field) {
  if (values.empty()) return;
  for (std::size_t i = 0; i < values.size(); ++i) b.row[i].*field = values[i];
  b.columns |= column;
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
    // The wire keeps one array per column, as it did when a batch stored columns: the
    // request's, then each other column's, empty where the batch does not carry it.
    put_column(w, b, &TokenRow::request);
    put_column(w, b, kColumnPosition, &TokenRow::position);
    put_column(w, b, kColumnRank, &TokenRow::rank);
    put_column(w, b, kColumnToken, &TokenRow::token);
    put_column(w, b, kColumnSlot, &TokenRow::slot);
    put_column(w, b, kColumnWeight, &TokenRow::weight);
    put_column(w, b, kColumnEntry, &TokenRow::entry);
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
  Columns scratch;
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
    // Read as the columns the wire holds, checked, then stored into the rows.
    Columns& c = scratch;
    SY_RETURN_IF_ERROR(r.get_array(c.request));
    SY_RETURN_IF_ERROR(r.get_array(c.position));
    SY_RETURN_IF_ERROR(r.get_array(c.rank));
    SY_RETURN_IF_ERROR(r.get_array(c.token));
    SY_RETURN_IF_ERROR(r.get_array(c.slot));
    SY_RETURN_IF_ERROR(r.get_array(c.weight));
    SY_RETURN_IF_ERROR(r.get_array(c.entry));
    const std::size_t rows = c.request.size();
    // Each kind of batch carries the columns its receiver reads (TokenBatch): expert rows a
    // rank, a slot, a weight and a token-pool entry (the expert dispatch and the expert read
    // them; no position, no token); expert outputs (rows bound for an attention or sampler
    // layer with a top-k slot each) a slot and the entry only, for the token pool; other rows
    // a position and a rank, and block 0's a token.
    if (b.layer.kind == LayerKind::Expert) {
      if (c.rank.size() != rows || c.slot.size() != rows || c.weight.size() != rows || c.entry.size() != rows ||
          !c.position.empty() || !c.token.empty())
        return Status::Error(
            "an expert batch's rows need a rank, a slot, a weight and an entry each, and no position or token");
    } else if (!c.slot.empty()) {
      if (c.slot.size() != rows || c.entry.size() != rows || !c.position.empty() || !c.rank.empty() ||
          !c.token.empty() || !c.weight.empty())
        return Status::Error("an expert output batch's rows need a request, a slot and an entry each, and nothing else");
    } else if (c.position.size() != rows || c.rank.size() != rows || (!c.weight.empty() && c.weight.size() != rows) ||
               (!c.token.empty() && c.token.size() != rows) || !c.entry.empty()) {
      return Status::Error("a batch's columns differ in length");
    }
    // An entry indexes the receiving rank's token pool, which checks it is one it holds (debug
    // builds); a negative one is no index at all.
    for (const std::int32_t e : c.entry)
      if (e < 0) return Status::Error("a negative token-pool entry");
    // Every column is now empty or one value per row.
    b.row.assign(rows, TokenRow{});
    b.columns = 0;
    get_column(b, c.request, 0, &TokenRow::request);
    get_column(b, c.position, kColumnPosition, &TokenRow::position);
    get_column(b, c.rank, kColumnRank, &TokenRow::rank);
    get_column(b, c.token, kColumnToken, &TokenRow::token);
    get_column(b, c.slot, kColumnSlot, &TokenRow::slot);
    get_column(b, c.weight, kColumnWeight, &TokenRow::weight);
    get_column(b, c.entry, kColumnEntry, &TokenRow::entry);
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
