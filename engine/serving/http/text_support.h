// The model's text side for the API: its tokenizer (tokenizer.json) and chat template, when its
// directory has them. Turns text prompts and chat messages into token ids; without a tokenizer
// the API takes token ids only and says so.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/serving/http/api_error.h"
#include "engine/text/chat_template.h"
#include "engine/text/tokenizer.h"

namespace sy::http {

class TextSupport {
 public:
  TextSupport() = default;  // token ids only
  // No tokenizer.json: token ids only. A tokenizer.json that does not load is an error naming
  // it. A missing or broken chat template only turns chat requests away (with its message).
  static StatusOr<TextSupport> load(const std::filesystem::path& model_dir);

  const text::Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
  bool chat() const { return chat_template_.has_value(); }
  // Why there is no chat: no tokenizer, or the template's own error.
  const std::string& no_chat_reason() const { return no_chat_reason_; }
  std::optional<std::int32_t> eos_token_id() const;
  // One line for the start-up banner: "tokenizer and chat template" or what is missing.
  std::string describe() const;

  using Ids = std::variant<std::vector<std::int32_t>, ApiError>;
  // A completion's text prompt, with the tokenizer's special tokens (bos) as HF adds them.
  Ids encode_prompt(const std::string& text) const;
  // Chat messages (and tools, null for none) through the template (add_generation_prompt,
  // bos/eos tokens), then encoded without adding special tokens again (the template wrote them);
  // POST /tokenize may ask otherwise for both, as vLLM's does. continue_final_message: rendered
  // without a generation prompt and cut after the final message (text::cut_after_final_message),
  // which the model then continues; the caller refuses it with add_generation_prompt.
  Ids encode_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools = nullptr,
                  bool add_generation_prompt = true, bool add_special_tokens = false,
                  bool continue_final_message = false) const;
  // The variables the template gets for them, as vLLM passes them to transformers'
  // apply_chat_template (tools only when given: absent, the template sees None).
  static nlohmann::ordered_json chat_context(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                             const std::string& bos_token, const std::string& eos_token,
                                             bool add_generation_prompt = true);

 private:
  std::optional<text::Tokenizer> tokenizer_;
  std::optional<text::ChatTemplate> chat_template_;
  std::string no_chat_reason_ = "the model directory has no tokenizer.json";
};

}  // namespace sy::http
