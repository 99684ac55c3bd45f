// The unit that travels between workers: token rows of any number of requests bound for one
// layer, with AMoE's per-token metadata (request id, position, DP rank, top-k slot and weight,
// activations) stored as columns. Queues, dispatchers and the token pool append and move whole
// batches, so a decode step of many requests costs a few array appends per row, not one
// object per request. The activations are a handle to the device backend's memory: the
// runtime moves it and asks the backend to combine it, and never touches a value.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/runtime/activations.h"
#include "engine/runtime/layer_id.h"

namespace sy {

struct TokenBatch {
  LayerId layer;             // where it is queued / going
  std::int32_t group = -1;   // grouped policies: micro-batch iteration tag; -1 under async
  std::int64_t oldest_ns = 0;  // when its earliest row entered the μ-queue it waits in

  // One entry per row. Rows of one request are contiguous and in position order (a prefill).
  // A batch carries the columns its receiver reads, no more: every row its request; attention
  // and sampler rows a position and a rank (block 0's a token too); expert rows a rank, a slot
  // and a weight (the expert and the dispatch after it read nothing else), and no position;
  // expert outputs (rows on their way back to the token pool: an attention or sampler layer,
  // with slots) a slot only. The columns a batch lacks stay empty. Per row they are a push
  // each, the sim's main cost.
  std::vector<std::int64_t> request;
  std::vector<std::int32_t> position;  // absolute position of the row
  std::vector<std::int32_t> rank;      // attention DP rank that owns the request's KV cache
  std::vector<std::int32_t> token;     // block 0 only: the token id to embed
  std::vector<std::int32_t> slot;      // expert rows: row_in_request·K + k, its token-pool slot
  std::vector<float> weight;           // expert rows: router weight
  Activations hidden;                  // rows × width, on the device's backend (null on the sim backend)

  std::int64_t rows() const { return static_cast<std::int64_t>(request.size()); }
  bool empty() const { return request.empty(); }
  // Inline: a batch is emptied at every delivery, drain and dispatch.
  void clear() {
    request.clear();
    position.clear();
    rank.clear();
    token.clear();
    slot.clear();
    weight.clear();
    hidden.reset();
  }
  // Appends every row of `src`, activations included (by their backend); when this batch is
  // empty it takes src's storage instead.
  void append(TokenBatch&& src);
  // Exchanges the rows (metadata columns and activations) with `other`, keeping each batch's
  // identity (layer, group, oldest): how a μ-queue hands its rows over and keeps its storage.
  void swap_rows(TokenBatch& other) noexcept;
  // Calls fn(first_row, rows) for each run of rows that belong to one request.
  template <class Fn>
  void for_each_request(Fn&& fn) const {
    const std::int64_t n = rows();
    for (std::int64_t i = 0; i < n;) {
      std::int64_t j = i + 1;
      while (j < n && request[static_cast<std::size_t>(j)] == request[static_cast<std::size_t>(i)]) ++j;
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
