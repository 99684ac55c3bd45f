#include "engine/serving/http/tokenize_handler.h"

#include <optional>
#include <string>
#include <vector>

#include "base/json_parse.h"

namespace sy::http {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// The body as a JSON object, with the request's model checked as the completions check it.
std::variant<json, ApiError> read_body(std::string_view text, const ModelLimits& limits) {
  auto parsed = parse_json(text);
  if (!parsed.ok()) return ApiError::bad_field("", "the request body is not valid JSON: " + parsed.status().message());
  if (!parsed->is_object())
    return ApiError::bad_field("", "the request body must be a JSON object, got " + json_kind(*parsed));
  const auto model = parsed->find("model");
  if (auto e = check_model_field(model != parsed->end() ? &*model : nullptr, limits)) return *e;
  return std::move(*parsed);
}

// A boolean field, `fallback` when absent or null.
std::variant<bool, ApiError> flag(const json& body, const char* key, bool fallback) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    return ApiError::bad_field(key, std::string("'") + key + "' must be a boolean, got " + json_kind(*it));
  return it->get<bool>();
}

bool present(const json& body, const char* key) {
  const auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

}  // namespace

TokenizeHandler::Answer TokenizeHandler::tokenize(std::string_view text) const {
  auto read = read_body(text, limits_);
  if (const ApiError* e = std::get_if<ApiError>(&read)) return *e;
  const json& body = std::get<json>(read);
  const bool chat = present(body, "messages");
  if (chat && present(body, "prompt"))
    return ApiError::bad_field("prompt", "give either 'prompt' or 'messages', not both");
  if (!chat && !present(body, "prompt"))
    return ApiError::bad_field("prompt", "'prompt' (a string) or 'messages' (a chat) is required");
  // A template of the request's own would tokenize differently from what this server runs.
  for (const char* key : {"chat_template", "chat_template_kwargs"})
    if (present(body, key))
      return ApiError::bad_field(key, std::string("'") + key + "' is not supported: the model's own chat template is used");
  auto special = flag(body, "add_special_tokens", !chat);  // vLLM's defaults: the template writes them for chat
  auto strs = flag(body, "return_token_strs", false);
  auto generation = flag(body, "add_generation_prompt", true);
  auto continue_final = flag(body, "continue_final_message", false);
  for (auto* f : {&special, &strs, &generation, &continue_final})
    if (const ApiError* e = std::get_if<ApiError>(f)) return *e;
  if (std::get<bool>(continue_final) && !chat)
    return ApiError::bad_field("continue_final_message", "'continue_final_message' is for the chat form ('messages')");
  if (std::get<bool>(continue_final) && std::get<bool>(generation))
    return ApiError::bad_field("continue_final_message",
                               "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");

  TextSupport::Ids ids;
  if (chat) {
    // The messages and tools as a chat completion takes them: the same checks, the same shapes
    // for the template (flattened content, tool-call arguments as objects). The order of keys
    // matters to the template's tojson, so the body is read again keeping it.
    const ojson ordered = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
    if (ordered.is_discarded() || !ordered.is_object()) return ApiError::bad_field("", "the request body is not valid JSON");
    ojson as_chat = {{"messages", ordered.at("messages")}, {"tool_choice", "none"}};
    if (ordered.contains("tools")) as_chat["tools"] = ordered.at("tools");
    ParsedRequest parsed = parse_completion_request(as_chat.dump(), Endpoint::ChatCompletions, limits_);
    if (const ApiError* e = std::get_if<ApiError>(&parsed)) return *e;
    const CompletionRequest& r = std::get<CompletionRequest>(parsed);
    ids = text_.encode_chat(r.messages, r.tools, std::get<bool>(generation), std::get<bool>(special),
                            std::get<bool>(continue_final));
  } else {
    const json& prompt = body.at("prompt");
    if (!prompt.is_string()) return ApiError::bad_field("prompt", "'prompt' must be a string, got " + json_kind(prompt));
    if (!text_.tokenizer())
      return ApiError::bad_field("prompt", "this model has no tokenizer.json: there is no text to tokenize with");
    auto encoded = text_.tokenizer()->try_encode(prompt.get<std::string>(), std::get<bool>(special));
    if (!encoded.ok())
      return ApiError::bad_field("prompt", "the tokenizer cannot encode the prompt: " + encoded.status().message());
    ids = std::move(*encoded);
  }
  if (const ApiError* e = std::get_if<ApiError>(&ids)) return *e;
  const auto& tokens = std::get<std::vector<std::int32_t>>(ids);
  ojson out = {{"count", tokens.size()}, {"max_model_len", limits_.context}, {"tokens", tokens}, {"token_strs", nullptr}};
  if (std::get<bool>(strs)) {
    ojson pieces = ojson::array();
    for (std::int32_t id : tokens) pieces.push_back(text_.tokenizer()->id_to_token(id).value_or(""));
    out["token_strs"] = std::move(pieces);
  }
  return out;
}

TokenizeHandler::Answer TokenizeHandler::detokenize(std::string_view text) const {
  auto read = read_body(text, limits_);
  if (const ApiError* e = std::get_if<ApiError>(&read)) return *e;
  const json& body = std::get<json>(read);
  if (!present(body, "tokens")) return ApiError::bad_field("tokens", "'tokens' (a list of token ids) is required");
  const json& list = body.at("tokens");
  if (!list.is_array()) return ApiError::bad_field("tokens", "'tokens' must be a list of token ids, got " + json_kind(list));
  std::vector<std::int32_t> ids;
  ids.reserve(list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& v = list[i];
    const std::string at = "tokens[" + std::to_string(i) + "]";
    if (!v.is_number_integer()) return ApiError::bad_field(at, "'" + at + "' must be a token id, got " + json_kind(v));
    const auto id = v.get<std::int64_t>();
    if (id < 0 || id >= limits_.vocab_size)
      return ApiError::bad_field(at, "'" + at + "' is " + std::to_string(id) + ", not a token id of this model (0 to " +
                                         std::to_string(limits_.vocab_size - 1) + ")");
    ids.push_back(static_cast<std::int32_t>(id));
  }
  if (!text_.tokenizer())
    return ApiError::bad_field("tokens", "this model has no tokenizer.json: there is no text to turn the ids into");
  return ojson{{"prompt", text_.tokenizer()->decode(ids, /*skip_special_tokens=*/false)}};
}

}  // namespace sy::http
