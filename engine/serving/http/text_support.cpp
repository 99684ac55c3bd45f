#include "engine/serving/http/text_support.h"

namespace sy::http {

StatusOr<TextSupport> TextSupport::load(const std::filesystem::path& model_dir) {
  TextSupport t;
  std::error_code ec;
  if (!std::filesystem::exists(model_dir / "tokenizer.json", ec)) return t;
  auto tokenizer = text::Tokenizer::load(model_dir);
  if (!tokenizer.ok()) return tokenizer.status();
  t.tokenizer_.emplace(std::move(tokenizer).value());
  auto chat = text::ChatTemplate::load(model_dir);
  if (chat.ok()) {
    t.chat_template_.emplace(std::move(chat).value());
    t.no_chat_reason_.clear();
  } else {
    t.no_chat_reason_ = "the model's chat template cannot be used: " + chat.status().message();
  }
  return t;
}

std::optional<std::int32_t> TextSupport::eos_token_id() const {
  return tokenizer_ ? tokenizer_->eos_token_id() : std::nullopt;
}

std::string TextSupport::describe() const {
  if (!tokenizer_) return "token ids only (" + no_chat_reason_ + ")";
  if (!chat_template_) return "text through the model's tokenizer; no chat (" + no_chat_reason_ + ")";
  return "text through the model's tokenizer and chat template";
}

TextSupport::Ids TextSupport::encode_prompt(const std::string& text) const {
  if (!tokenizer_)
    return ApiError::bad_field("prompt", "this model has no tokenizer.json: send the prompt as a list of token ids");
  auto ids = tokenizer_->try_encode(text, /*add_special_tokens=*/true);
  if (!ids.ok()) return ApiError::bad_field("prompt", "the tokenizer cannot encode the prompt: " + ids.status().message());
  return std::move(*ids);
}

nlohmann::ordered_json TextSupport::chat_context(const nlohmann::ordered_json& messages,
                                                const nlohmann::ordered_json& tools, const std::string& bos_token,
                                                const std::string& eos_token, bool add_generation_prompt) {
  nlohmann::ordered_json context = {{"messages", messages}};
  if (!tools.is_null()) context["tools"] = tools;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = bos_token;
  context["eos_token"] = eos_token;
  return context;
}

TextSupport::Ids TextSupport::encode_chat(const nlohmann::ordered_json& messages,
                                          const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                          bool add_special_tokens, bool continue_final_message) const {
  if (!chat_template_) return ApiError::bad_field("messages", "chat is not available: " + no_chat_reason_);
  auto prompt = chat_template_->render(chat_context(messages, tools, tokenizer_->bos_token(), tokenizer_->eos_token(),
                                                   add_generation_prompt && !continue_final_message));
  // The template's own checks (roles that must alternate, …) speak through raise_exception.
  if (!prompt.ok()) return ApiError::bad_field("messages", "the chat template refused the messages: " + prompt.status().message());
  if (continue_final_message) {
    // The parser flattened every message's content to a string.
    const auto& last = messages.back();
    const std::string content =
        last.contains("content") && last["content"].is_string() ? last["content"].get<std::string>() : "";
    prompt = text::cut_after_final_message(std::move(*prompt), content);
    if (!prompt.ok()) return ApiError::bad_field("continue_final_message", prompt.status().message());
  }
  auto ids = tokenizer_->try_encode(*prompt, add_special_tokens);
  if (!ids.ok())
    return ApiError::bad_field("messages", "the tokenizer cannot encode the rendered prompt: " + ids.status().message());
  return std::move(*ids);
}

}  // namespace sy::http
