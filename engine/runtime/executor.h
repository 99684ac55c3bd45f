// What a worker asks its backend to compute for one execution. The cpu backend does the math
// and reports how long it took; the sim backend (no math) reports what its cost model says.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/runtime/token_packet.h"
#include "kernels/cpu/sampling.h"

namespace sy {

// Routing of one attention packet's rows in a sparse block.
struct RoutedRows {
  std::vector<std::int32_t> expert_ids;  // rows × K
  std::vector<float> expert_weights;     // rows × K
  std::vector<float> ffn_in;             // rows × H: what the experts consume
  std::vector<float> shared_out;         // rows × H: shared expert output (qwen2_moe), else empty
};

// One expert's share of an expert execution.
struct ExpertBatch {
  std::int32_t expert = 0;
  std::vector<TokenPacket*> packets;
};

class Executor {
 public:
  virtual ~Executor() = default;

  // Attention half of `block` over one rank's packets, in place on their hidden rows (block 0
  // embeds the packets' tokens first). For a sparse block fills routed[i] for packets[i]; for a
  // dense block also applies the MLP, so the hidden rows are the next block's input. Returns
  // the execution's duration in ns.
  virtual std::int64_t attention(std::int32_t block, const std::vector<TokenPacket*>& packets,
                                 std::vector<RoutedRows>& routed) = 0;
  // Expert FFNs of `block`: each packet's hidden rows (ffn inputs) are replaced by the weighted
  // expert outputs. Several experts in one call form one grouped execution.
  virtual std::int64_t experts(std::int32_t block, const std::vector<ExpertBatch>& batches) = 0;
  // Final norm, lm_head and sampling of each packet's last row; next (resized to
  // packets.size()) gets next[i] for packets[i].
  virtual std::int64_t sample(const std::vector<TokenPacket*>& packets, std::vector<std::int32_t>& next) = 0;
  // Combines the K expert outputs (and the shared expert's) of one packet into its residual:
  // hidden += Σ_k slots[k] + shared, summed in rank order so arrival order does not matter.
  virtual void merge(TokenPacket& packet, const std::vector<float>& slot_outputs,
                     const std::vector<float>& shared_out) = 0;

  // Attention ranks only: request lifecycle and KV capacity.
  virtual bool admit(std::int64_t request, std::int32_t positions, kernels::SamplingParams sampling,
                     std::uint64_t seed) = 0;
  virtual void release(std::int64_t request) = 0;
  virtual std::int32_t free_kv_pages() const = 0;
  virtual std::int32_t kv_pages_for(std::int32_t positions) const = 0;
};

}  // namespace sy
