// The log-probabilities of a run of one request's prompt tokens, as one sample execution
// computed them (SamplingSpec::prompt_logprobs): what lm-evaluation-harness scores a
// continuation with, through `echo` and vLLM's `prompt_logprobs`.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/logprobs.h"

namespace sy {

struct PromptLogprobs {
  std::int64_t request = -1;
  // The prompt position of tokens[0]: token i of the run is prompt token first_position + i,
  // scored from the logits of the row before it. At least 1 (position 0 has no row before it).
  std::int32_t first_position = 1;
  // One per position, consecutive; each TokenLogprobs' token is the prompt's token there (not a
  // sampled one), with its rank and the request's k most likely alternatives.
  std::vector<kernels::TokenLogprobs> tokens;
};

}  // namespace sy
