// The part of prompt scoring (SamplingSpec::prompt_logprobs) every backend shares: which of a
// request's rows score a prompt token, in slices of rows, each token's log-probabilities from
// its row's logits; a backend supplies only the logits of a slice (its own final norm and lm_head).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/runtime/prompt_logprobs.h"
#include "engine/runtime/sequence.h"
#include "engine/runtime/token_batch.h"
#include "kernels/cpu/logprobs.h"

namespace sy {

// How many of a request's rows in a sample execution score a prompt token: its rows hold
// consecutive positions from `first_position`, and each before the prompt's last position
// scores the prompt token after it. The rows that do are the first ones.
inline std::int64_t prompt_scoring_rows(std::int32_t first_position, std::int64_t rows, std::size_t prompt_length) {
  const std::int64_t before_last = static_cast<std::int64_t>(prompt_length) - 1 - first_position;
  return std::clamp<std::int64_t>(before_last, 0, rows);
}

// Rows whose logits one pass computes: a long prompt's logits all at once would take
// rows × vocab floats.
inline constexpr std::int64_t kPromptRowsPerPass = 32;

// Scores the prompt tokens that the request's rows [first, first + rows) of `batch` precede
// into a new run of `out` (none when they precede none) and returns how many. `logits_of(slice)`
// gives the logits of the batch rows in `slice` (at most kPromptRowsPerPass of them): slice.size()
// × vocab floats, read before its next call.
template <class LogitsOf>
std::int64_t score_prompt_rows(const TokenBatch& batch, std::int64_t first, std::int64_t rows,
                               const SequenceContext& s, std::int32_t vocab, std::vector<PromptLogprobs>& out,
                               LogitsOf&& logits_of) {
  const std::int32_t position = batch.at(first).position;
  const std::int64_t n = prompt_scoring_rows(position, rows, s.prompt.size());
  if (n == 0) return 0;
  PromptLogprobs& p = out.emplace_back();
  p.request = s.request;
  p.first_position = position + 1;
  p.tokens.resize(static_cast<std::size_t>(n));
  std::vector<std::int32_t> slice;
  for (std::int64_t lo = 0; lo < n; lo += kPromptRowsPerPass) {
    const std::int64_t hi = std::min(n, lo + kPromptRowsPerPass);
    slice.clear();
    for (std::int64_t r = lo; r < hi; ++r) slice.push_back(static_cast<std::int32_t>(first + r));
    const float* logits = logits_of(std::as_const(slice));
    for (std::int64_t r = lo; r < hi; ++r) {
      const std::int32_t token = s.prompt[static_cast<std::size_t>(position + r + 1)];
      kernels::token_logprobs(logits + static_cast<std::size_t>(r - lo) * static_cast<std::size_t>(vocab), vocab,
                              token, s.sampling.prompt_logprobs, p.tokens[static_cast<std::size_t>(r)]);
    }
  }
  return n;
}

}  // namespace sy
