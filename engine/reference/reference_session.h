// The single-request reference path: prefill, then decode one token at a time over a paged
// KV cache. Every later runtime path is checked against what this produces.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/forward/model_ops.h"
#include "engine/kv/kv_block_allocator.h"
#include "engine/kv/paged_kv_cache.h"
#include "engine/kv/sequence_kv.h"
#include "kernels/cpu/sampling.h"

namespace sy {

class ReferenceSession {
 public:
  // KV capacity for max_positions positions of this one request; inputs as ModelOps takes it
  // (WeightType: the cuda backend's roundings, for comparing against a GPU in bf16).
  ReferenceSession(std::shared_ptr<const ModelWeights> weights, std::int32_t max_positions,
                   std::int32_t page_size = 16, kernels::GemmInputs inputs = kernels::GemmInputs::Float32);

  // Runs `tokens` at the next positions of the sequence. Returns the logits of every token
  // ([n, vocab]) or, unless all_logits, of the last one only ([vocab]). Errors: a token id
  // outside the vocabulary (named), or more positions than the session holds.
  StatusOr<std::vector<float>> forward(std::span<const std::int32_t> tokens, bool all_logits);

  // Forgets the sequence and returns its KV pages.
  void reset();

  std::int32_t length() const { return kv_.length; }
  std::int32_t max_positions() const { return max_positions_; }
  const ModelConfig& config() const { return ops_.config(); }

 private:
  ModelOps ops_;
  std::int32_t max_positions_;
  PagedKvCache cache_;
  KvBlockAllocator pages_;
  SequenceKv kv_;
  Workspace ws_;
  std::vector<float> hidden_;
};

struct GenerateOptions {
  std::int32_t max_new_tokens = 16;
  kernels::SamplingParams sampling;  // temperature 0: greedy
  kernels::Penalties penalties;      // over the prompt and the tokens generated so far
  std::vector<kernels::TokenBias> logit_bias;  // added before the penalties
  std::uint64_t seed = 0;
  std::optional<std::int32_t> eos_token_id;  // stop after emitting it
};

// Prefills the prompt and decodes up to max_new_tokens; returns the new token ids.
StatusOr<std::vector<std::int32_t>> generate(ReferenceSession& session,
                                             std::span<const std::int32_t> prompt,
                                             const GenerateOptions& options);

}  // namespace sy
