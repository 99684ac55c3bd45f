// The "logprobs" object of an OpenAI choice, whole or per stream chunk: completions' parallel
// lists {tokens, token_logprobs, top_logprobs, text_offset} or chat's {content: [{token,
// logprob, bytes, top_logprobs}]}, with tokens as text the way vLLM shows them.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/serving/http/completion_request.h"
#include "engine/text/tokenizer.h"
#include "kernels/cpu/logprobs.h"

namespace sy::http {

class LogprobsJson {
 public:
  // `tokenizer` (may be null: tokens then read "token_id:<id>") must outlive this object;
  // `top`: the alternatives the request asked for.
  LogprobsJson(const text::Tokenizer* tokenizer, Endpoint endpoint, std::int32_t top);
  // The object for these tokens (the whole answer's, or one chunk's: text offsets continue from
  // the previous call). Null when there are none (a backend without logits).
  nlohmann::json make(std::span<const kernels::TokenLogprobs> tokens);
  // Completions with echo: the prompt's tokens first, then `tokens` (as make()). The prompt's
  // first token has none to be scored from: its token_logprobs and top_logprobs entries are
  // null, as OpenAI's and vLLM's; `prompt` holds the others' (positions 1, 2, …, each with the
  // prompt's token). The API asks for it only where the backend has logits.
  nlohmann::json make_echo(std::int32_t first_prompt_token, std::span<const kernels::TokenLogprobs> prompt,
                           std::span<const kernels::TokenLogprobs> tokens);

  // vLLM's choice-level "prompt_logprobs": null for the first prompt token, then per token an
  // object {"<id>": {"logprob", "rank", "decoded_token"}} holding the prompt's token (its rank
  // among the vocabulary) and its `top` most likely alternatives (ranks 1 to top; a token that
  // is also an alternative reads as the alternative, as vLLM's dictionary keeps the later).
  nlohmann::json prompt_logprobs(std::span<const kernels::TokenLogprobs> prompt, std::int32_t top) const;

 private:
  std::string token_text(std::int32_t id) const;
  // Appends one token's entries to a completions object's four lists.
  void append(nlohmann::json& out, const kernels::TokenLogprobs& t);

  const text::Tokenizer* tokenizer_;
  Endpoint endpoint_;
  std::int32_t top_;
  std::int64_t offset_ = 0;  // characters of token text so far (completions' text_offset)
};

}  // namespace sy::http
