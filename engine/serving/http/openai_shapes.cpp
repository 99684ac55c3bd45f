#include "engine/serving/http/openai_shapes.h"

namespace sy::http {

using nlohmann::json;

const char* openai_finish_reason(FinishReason reason) { return reason == FinishReason::Length ? "length" : "stop"; }

json usage_json(const Usage& u) {
  json out = {{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  if (u.cached_tokens) out["prompt_tokens_details"] = {{"cached_tokens", *u.cached_tokens}};
  return out;
}

namespace {

json header_json(const AnswerHeader& h, bool chunk) {
  const bool chat = h.endpoint == Endpoint::ChatCompletions;
  return {{"id", h.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", h.created},
          {"model", h.model}};
}

json reason_json(std::optional<FinishReason> finish) {
  return finish ? json(openai_finish_reason(*finish)) : json(nullptr);
}

}  // namespace

json completion_json(const AnswerHeader& h, const std::vector<ChoiceJson>& choices, const Usage& usage) {
  json out = header_json(h, false);
  out["choices"] = json::array();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const ChoiceJson& c = choices[i];
    json choice = {{"index", i},
                   {"logprobs", c.logprobs},
                   {"finish_reason", c.tool_calls.empty() || !c.tool_calls_finish ? openai_finish_reason(c.reason) : "tool_calls"}};
    if (h.endpoint == Endpoint::ChatCompletions) {
      choice["message"] = {{"role", "assistant"}, {"content", c.content_null ? json(nullptr) : json(c.text)}};
      if (!c.tool_calls.empty()) {
        json calls = json::array();
        for (const ToolCall& call : c.tool_calls)
          calls.push_back({{"id", call.id},
                           {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
        choice["message"]["tool_calls"] = std::move(calls);
      }
    } else {
      choice["text"] = c.text;
    }
    choice["token_ids"] = c.ids;
    if (c.prompt_logprobs) choice["prompt_logprobs"] = *c.prompt_logprobs;
    out["choices"].push_back(std::move(choice));
  }
  out["usage"] = usage_json(usage);
  return out;
}

json chunk_json(const AnswerHeader& h, std::int32_t index, const std::string& text, const std::vector<std::int32_t>& ids,
                std::optional<FinishReason> finish, const std::optional<Usage>& usage, json logprobs,
                bool tool_calls_finish) {
  json out = header_json(h, true);
  json choice = {{"index", index},
                 {"logprobs", std::move(logprobs)},
                 {"finish_reason", finish && tool_calls_finish ? json("tool_calls") : reason_json(finish)}};
  if (h.endpoint == Endpoint::ChatCompletions) {
    choice["delta"] = finish && text.empty() ? json::object() : json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["token_ids"] = ids;
  out["choices"] = json::array({std::move(choice)});
  if (usage) out["usage"] = usage_json(*usage);
  return out;
}

json tool_call_chunk_json(const AnswerHeader& h, std::int32_t index, std::size_t position, const ToolCall& call,
                          bool arguments) {
  json out = header_json(h, true);
  json delta = arguments ? json{{"index", position}, {"function", {{"arguments", call.arguments}}}}
                         : json{{"index", position}, {"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}}}};
  out["choices"] = json::array({{{"index", index},
                                 {"delta", {{"tool_calls", json::array({std::move(delta)})}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr},
                                 {"token_ids", json::array()}}});
  return out;
}

json role_chunk_json(const AnswerHeader& h, std::int32_t index) {
  json out = header_json(h, true);
  out["choices"] = json::array({{{"index", index},
                                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}});
  return out;
}

json usage_chunk_json(const AnswerHeader& h, const Usage& usage) {
  json out = header_json(h, true);
  out["choices"] = json::array();
  out["usage"] = usage_json(usage);
  return out;
}

json models_json(const std::string& model, std::int64_t created, std::int32_t context) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "switchyard"},
                                 {"root", model},
                                 {"max_model_len", context}}})}};
}

std::string json_text(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& data) { return "data: " + json_text(data) + "\n\n"; }

}  // namespace sy::http
