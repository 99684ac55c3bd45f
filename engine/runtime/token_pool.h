// The token pool of a device that runs attention (AMoE §3.2): a token's residual stream waits
// here until the K expert outputs of each of its rows are back, and leaves with them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/runtime/token_packet.h"

namespace sy {

class TokenPool {
 public:
  // What leaves the pool when the last expert output of an entry arrives: the residual and,
  // per row and top-k slot, the expert output (rows × K × width), plus the shared expert's.
  struct Completed {
    TokenPacket residual;
    std::vector<float> slot_outputs;
    std::vector<float> shared_out;
  };

  // Holds `residual` (already addressed to the layer after the expert block) until
  // residual.rows × k expert outputs, each of `width` floats, have arrived. One entry per
  // (request, next block): a request has at most one token batch in flight per block.
  void hold(TokenPacket residual, std::int32_t k, std::int64_t width, std::vector<float> shared_out);

  // Takes one expert packet (its `slots` say which row·K + k each of its rows fills) for the
  // entry of (packet.request, packet.layer.block). Returns the entry once it is complete.
  std::optional<Completed> absorb(const TokenPacket& expert_output);

  bool empty() const { return entries_.empty(); }
  std::size_t size() const;

 private:
  struct Entry {
    TokenPacket residual;
    std::vector<float> slot_outputs;
    std::vector<float> shared_out;
    std::vector<bool> filled;  // per slot: guards against a slot arriving twice (our bug)
    std::int32_t remaining = 0;
    std::int64_t width = 0;
  };
  std::unordered_map<std::int64_t, std::map<std::int32_t, Entry>> entries_;  // request -> block -> entry
};

}  // namespace sy
