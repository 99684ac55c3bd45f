// What an attention rank's executions need of each request besides its rows: where its KV
// cache lives (a block table handed out by the rank's KV block manager) and how its next token
// is drawn. Executors receive these per execution; they keep no request state of their own.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/sampling.h"

namespace sy {

struct SamplingSpec {
  float temperature = 0.0f;  // 0: greedy
  float top_p = 1.0f;
  std::int32_t top_k = 0;    // 0: no top-k cut
  std::uint64_t seed = 0;    // the token at position p is drawn with a generator seeded from (seed, p)
  // -1: no log-probabilities (the default costs nothing); k ≥ 0: the sampled token's and the k
  // most likely tokens' (kernels::token_logprobs).
  std::int32_t logprobs = -1;
  float min_p = 0.0f;        // 0: no min-p cut (kernels::SamplingParams)
  // OpenAI's penalties on the tokens sampled so far and vLLM's on those and the prompt's
  // (kernels::Penalties); 0, 0 and 1: none.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  // -1: none; k ≥ 0: also the log-probability of every prompt token after the first, given the
  // tokens before it, with its rank and the k most likely alternatives (PromptLogprobs). Such
  // a request computes logits for every prompt row (lm_head over them) and computes every
  // position: it takes no KV from a prefix cache.
  std::int32_t prompt_logprobs = -1;

  bool operator==(const SamplingSpec&) const = default;
  kernels::Penalties penalties() const { return {presence_penalty, frequency_penalty, repetition_penalty}; }
  bool penalized() const { return penalties().any(); }
};

struct SequenceContext {
  std::int64_t request = -1;
  const std::int32_t* block_table = nullptr;  // page ids; valid while the request is admitted
  std::int32_t pages = 0;
  SamplingSpec sampling;
  // The tokens sampled for the request so far, kept only when sampling.penalized(), and its
  // prompt, kept only under a repetition penalty or when it asks for prompt log-probabilities;
  // read by sample executions alone (the next token is appended after the execution that drew
  // it completed).
  std::span<const std::int32_t> outputs;
  std::span<const std::int32_t> prompt;
  std::span<const kernels::TokenBias> logit_bias;  // OpenAI's, added before the penalties
  // Guided decoding (structured output): the tokens the next draw may take, a bit per id (bit
  // id % 32 of word id / 32; an id past the words is not allowed); empty: no constraint. The
  // sampler sets every other token's logit to -inf first, before the log-probabilities, the
  // logit bias and the penalties, as vLLM applies its grammar bitmask to the logits before its
  // sampler. Updated as each sampled token is appended (KvBlockManager::sampled).
  std::span<const std::uint32_t> allowed{};
  // The prompt's length, always (the prompt itself is kept only as said above): a pass whose
  // last row of the request lies before position prompt_length − 1 holds a chunk of the prompt
  // that is not its last (chunked prefill) and samples nothing for it. 0: not known.
  std::int32_t prompt_length = 0;
};

}  // namespace sy
