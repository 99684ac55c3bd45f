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

 private:
  std::string token_text(std::int32_t id) const;

  const text::Tokenizer* tokenizer_;
  Endpoint endpoint_;
  std::int32_t top_;
  std::int64_t offset_ = 0;  // characters of token text so far (completions' text_offset)
};

}  // namespace sy::http
