// What a worker asks its backend to compute for one execution. The cpu backend does the math
// and reports how long it took; the sim backend (no math) reports what its cost model says.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/runtime/token_batch.h"
#include "kernels/cpu/sampling.h"

namespace sy {

// Routing of an attention batch's rows in a sparse block.
struct RoutedRows {
  std::vector<std::int32_t> expert_ids;  // rows × K
  std::vector<float> expert_weights;     // rows × K
  std::vector<float> ffn_in;             // rows × H: what the experts consume (empty without tensors)
  std::vector<float> shared_out;         // rows × H: shared expert output (qwen2_moe), else empty
};

class Executor {
 public:
  virtual ~Executor() = default;

  // Attention half of `block` over one rank's rows, in place on their hidden rows (block 0
  // embeds the rows' tokens first). For a sparse block fills `routed` for every row; for a
  // dense block also applies the MLP, so the hidden rows are the next block's input. Returns
  // the execution's duration in ns.
  virtual std::int64_t attention(std::int32_t block, TokenBatch& batch, RoutedRows& routed) = 0;
  // Expert FFNs of `block`, one batch per expert (batch->layer.index): each row's hidden
  // (its ffn input) is replaced by the expert's output scaled by the row's weight. Several
  // experts in one call form one grouped execution.
  virtual std::int64_t experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert) = 0;
  // Final norm, lm_head and sampling of the last row of each request in `batch`; next gets one
  // token per request, in batch order.
  virtual std::int64_t sample(TokenBatch& batch, std::vector<std::int32_t>& next) = 0;
  // Combines the K expert outputs (and the shared expert's) of one request's rows into its
  // residual: hidden += Σ_k slot outputs + shared, summed in slot order so that arrival order
  // does not matter.
  virtual void merge(std::int32_t rows, std::vector<float>& hidden, const std::vector<float>& slot_outputs,
                     const std::vector<float>& shared_out) = 0;

  // Attention ranks only: request lifecycle and KV capacity.
  virtual bool admit(std::int64_t request, std::int32_t positions, kernels::SamplingParams sampling,
                     std::uint64_t seed) = 0;
  virtual void release(std::int64_t request) = 0;
  virtual std::int32_t free_kv_pages() const = 0;
  virtual std::int32_t kv_pages_for(std::int32_t positions) const = 0;
};

}  // namespace sy
