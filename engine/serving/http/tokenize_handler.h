// POST /tokenize and /detokenize, vLLM's endpoints for clients that count or inspect tokens
// (prompt budgeting, lm-eval's context trimming, debugging a chat template): the server's own
// tokenizer and chat template, so that a client sees exactly the ids a completion would run on.
#pragma once

#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "engine/serving/http/api_error.h"
#include "engine/serving/http/completion_request.h"
#include "engine/serving/http/text_support.h"

namespace sy::http {

class TokenizeHandler {
 public:
  // `text` must outlive the handler.
  TokenizeHandler(ModelLimits limits, const TextSupport& text) : limits_(std::move(limits)), text_(text) {}

  using Answer = std::variant<nlohmann::ordered_json, ApiError>;
  // {"prompt", "add_special_tokens" (true), "return_token_strs" (false)} or {"messages", "tools",
  // "add_generation_prompt" (true), "add_special_tokens" (false), "return_token_strs"}: the ids a
  // completion or chat completion of it would be given, as {"count", "max_model_len", "tokens",
  // "token_strs"}. Messages and tools are checked as /v1/chat/completions checks them.
  Answer tokenize(std::string_view body) const;
  // {"tokens": [ids]}: their text with the special tokens kept, as {"prompt"}.
  Answer detokenize(std::string_view body) const;

 private:
  const ModelLimits limits_;
  const TextSupport& text_;
};

}  // namespace sy::http
