// Log-probabilities of a sampled token and its most likely alternatives, for the API's
// logprobs / top_logprobs.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace sy::kernels {

// The most alternatives one token may report (vLLM's default max_logprobs).
inline constexpr std::int32_t kMaxTopLogprobs = 20;

struct TokenLogprobs {
  std::int32_t token = -1;  // the sampled token; -1: none was asked for
  float logprob = 0.0f;     // its log-probability
  // The `top` most likely tokens, most likely first (ties to the lower id), with theirs.
  std::vector<std::pair<std::int32_t, float>> top;
  // How many tokens are at least as likely as it, itself included (1: the most likely), as
  // vLLM ranks a token (prompt_logprobs' "rank").
  std::int32_t rank = 0;
};

// Fills `out` for `token` and the `top` most likely tokens (0 ≤ top ≤ kMaxTopLogprobs) from the
// raw model distribution, log_softmax(logits): before temperature, top-k and top-p, as vLLM v1
// reports them, so the numbers do not depend on how the token was drawn. NaN logits count as
// -inf. O(vocab · log top).
void token_logprobs(const float* logits, std::int32_t vocab, std::int32_t token, std::int32_t top,
                    TokenLogprobs& out);

}  // namespace sy::kernels
