// The unit that travels between workers: token rows of any number of requests bound for one
// layer, with AMoE's per-token metadata (request id, position, DP rank, top-k slot and weight,
// activations) stored as one record per row. Queues, dispatchers and the token pool append and
// move whole batches, so a decode step of many requests costs an array append per row, not one
// object per request. The activations are a handle to the device backend's memory: the
// runtime moves it and asks the backend to combine it, and never touches a value.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/runtime/activations.h"
#include "engine/runtime/layer_id.h"

namespace sy {

// One row of a TokenBatch: every field a row of any kind may carry, in one record, so that a
// row copied by a dispatch or an append is one store of 32 bytes and one size check, not a
// push per column (each with its own capacity check). The fields a batch's kind does not carry
// (TokenBatch::columns) hold whatever its producer left there (zero by default) and are never read.
struct TokenRow {
  std::int64_t request = 0;
  std::int32_t position = 0;  // absolute position of the row
  std::int32_t rank = 0;      // attention DP rank that owns the request's KV cache
  std::int32_t token = 0;     // block 0 only: the token id to embed
  std::int32_t slot = 0;      // expert rows: row_in_request·K + k, its token-pool slot
  float weight = 0.0f;        // expert rows: router weight
  std::int32_t entry = 0;     // expert rows and outputs: the token-pool entry of the request (TokenPool::hold)
};
static_assert(sizeof(TokenRow) == 32, "a row is half a cache line");

// The fields (besides the request, which every row has) that the rows of a batch carry.
enum TokenColumn : std::uint8_t {
  kColumnPosition = 1,
  kColumnRank = 2,
  kColumnToken = 4,
  kColumnSlot = 8,
  kColumnWeight = 16,
  kColumnEntry = 32,
};
// The columns of each kind of batch (TokenBatch).
inline constexpr std::uint8_t kAttentionColumns = kColumnPosition | kColumnRank;
inline constexpr std::uint8_t kExpertColumns = kColumnRank | kColumnSlot | kColumnWeight | kColumnEntry;
inline constexpr std::uint8_t kOutputColumns = kColumnSlot | kColumnEntry;

struct TokenBatch {
  LayerId layer;             // where it is queued / going
  std::int32_t group = -1;   // grouped policies: micro-batch iteration tag; -1 under async
  std::int64_t oldest_ns = 0;  // when its earliest row entered the μ-queue it waits in

  // One entry per row. Rows of one request are contiguous and in position order (a prefill).
  // A batch carries the columns its receiver reads, no more: every row its request; attention
  // and sampler rows a position and a rank (block 0's a token too); expert rows a rank, a slot,
  // a weight and a token-pool entry (the expert and the dispatch after it read nothing else),
  // and no position; expert outputs (rows on their way back to the token pool: an attention or
  // sampler layer, with slots) a slot and the entry only. A residual the token pool holds has
  // its entries written in too. `columns` says which: whoever adds rows to a batch sets it (an
  // append into an empty batch takes the source's), and the wire codec sends those fields
  // only (docs/wire-format.md). It means nothing while the batch is empty.
  std::vector<TokenRow> row;
  std::uint8_t columns = 0;            // TokenColumn bits
  Activations hidden;                  // rows × width, on the device's backend (null on the sim backend)

  std::int64_t rows() const { return static_cast<std::int64_t>(row.size()); }
  bool empty() const { return row.empty(); }
  // Whether the rows carry column c (false for an empty batch, whatever `columns` says).
  bool has(TokenColumn c) const { return !row.empty() && (columns & c) != 0; }
  const TokenRow& at(std::int64_t i) const { return row[static_cast<std::size_t>(i)]; }
  // Inline: a batch is emptied at every delivery, drain and dispatch.
  void clear() {
    row.clear();
    hidden.reset();
  }
  // Appends every row of `src`, activations included (by their backend); when this batch is
  // empty it takes src's storage instead.
  void append(TokenBatch&& src);
  // Exchanges the rows (metadata and activations) with `other`, keeping each batch's
  // identity (layer, group, oldest): how a μ-queue hands its rows over and keeps its storage.
  void swap_rows(TokenBatch& other) noexcept;
  // Calls fn(first_row, rows) for each run of rows that belong to one request.
  template <class Fn>
  void for_each_request(Fn&& fn) const {
    const std::int64_t n = rows();
    const TokenRow* const r = row.data();
    for (std::int64_t i = 0; i < n;) {
      std::int64_t j = i + 1;
      while (j < n && r[j].request == r[i].request) ++j;
      fn(i, j - i);
      i = j;
    }
  }
};

// Batches sent from one device to another in one transfer. Grouped policies also send empty
// shipments: a receiver knows a micro-batch is complete when every expected sender has shipped.
struct Shipment {
  std::int32_t src = 0;
  std::int32_t dst = 0;
  LayerKind kind = LayerKind::Attention;  // the kind of layer the rows are queued for
  std::int32_t block = 0;
  std::int32_t group = -1;
  std::vector<TokenBatch> batches;  // one per destination μ-queue (expert), or one for attention

  std::int64_t tokens() const {
    std::int64_t n = 0;
    for (const auto& b : batches) n += b.rows();
    return n;
  }
};

}  // namespace sy
