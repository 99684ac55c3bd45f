// The unit that travels between workers: one request's token rows bound for one layer, with
// AMoE's metadata (request id, LayerID, tensors, prefill length, top-k weights).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/runtime/layer_id.h"

namespace sy {

struct TokenPacket {
  std::int64_t request = -1;
  LayerId layer;                 // where it is queued / going
  std::int32_t rank = 0;         // the attention DP rank that owns the request's KV cache
  std::int32_t group = -1;       // grouped policies: micro-batch iteration tag; -1 under async
  std::int32_t rows = 0;         // token rows: the prefill length, or 1 when decoding
  std::int32_t start_pos = 0;    // absolute position of the first row
  std::int64_t enqueued_ns = 0;  // when it entered its μ-queue
  std::vector<std::int32_t> tokens;   // block 0 only: the token ids to embed
  std::vector<float> hidden;          // rows × hidden activations (empty on the sim backend)
  std::vector<std::int32_t> slots;    // expert packets: token-pool slot (row·K + k) of each row
  std::vector<float> weights;         // expert packets: router weight of each row
};

// Packets sent from one device to another in one transfer. Grouped policies also send empty
// shipments: a receiver knows a micro-batch is complete when every expected sender has shipped.
struct Shipment {
  std::int32_t src = 0;
  std::int32_t dst = 0;
  LayerKind kind = LayerKind::Attention;  // the kind of layer the packets are queued for
  std::int32_t block = 0;
  std::int32_t group = -1;
  std::vector<TokenPacket> packets;

  std::int64_t tokens() const {
    std::int64_t n = 0;
    for (const auto& p : packets) n += p.rows;
    return n;
  }
};

}  // namespace sy
