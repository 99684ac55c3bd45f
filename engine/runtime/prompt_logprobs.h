// The log-probabilities of a run of one request's prompt tokens, as one sample execution
// computed them (SamplingSpec::prompt_logprobs): what lm-evaluation-harness scores a
// continuation with, through `echo` and vLLM's `prompt_logprobs`.
#pragma once

#include <algorithm>
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

// How many of a request's rows in a sample execution score a prompt token: its rows hold
// consecutive positions from `first_position`, and each before the prompt's last position
// scores the prompt token after it. The rows that do are the first ones.
inline std::int64_t prompt_scoring_rows(std::int32_t first_position, std::int64_t rows, std::size_t prompt_length) {
  const std::int64_t before_last = static_cast<std::int64_t>(prompt_length) - 1 - first_position;
  return std::clamp<std::int64_t>(before_last, 0, rows);
}

}  // namespace sy
