// The JSON bodies of OpenAI's completion and chat completion answers, whole and as stream
// chunks, and the model list. Each choice also carries the generated "token_ids" (as vLLM's
// return_token_ids does), so clients that work with ids get them without a tokenizer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/serving/http/completion_request.h"
#include "engine/serving/http/hermes_tool_parser.h"
#include "engine/serving/request_observer.h"

namespace sy::http {

// Identifies one answer: "cmpl-<n>" or "chatcmpl-<n>", the creation time, the model.
struct AnswerHeader {
  std::string id;
  std::int64_t created = 0;  // Unix seconds
  std::string model;
  Endpoint endpoint = Endpoint::Completions;
};

struct Usage {
  std::int32_t prompt_tokens = 0;
  std::int32_t completion_tokens = 0;
  // With prefix caching: prompt tokens whose KV came from the cache (OpenAI's
  // prompt_tokens_details.cached_tokens, which vLLM reports the same way).
  std::optional<std::int32_t> cached_tokens;
};

// "stop" or "length".
const char* openai_finish_reason(FinishReason reason);

nlohmann::json usage_json(const Usage& usage);

// One choice of a whole answer; `logprobs` is its LogprobsJson, null when not asked for.
struct ChoiceJson {
  std::string text;
  std::vector<std::int32_t> ids;
  FinishReason reason = FinishReason::Stop;
  nlohmann::json logprobs = nullptr;
  // Completions asking for vLLM's prompt_logprobs: LogprobsJson::prompt_logprobs; else absent.
  std::optional<nlohmann::json> prompt_logprobs;
  // Chat answers parsed for tool calls: with calls, the message carries them (content null when
  // `content_null`) and finish_reason is "tool_calls" (with tool_calls_finish), as vLLM answers.
  std::vector<ToolCall> tool_calls;
  bool content_null = false;
  // false: finish_reason stays the generation's even with calls (a named or required tool
  // choice, as vLLM answers those).
  bool tool_calls_finish = true;
};
// The whole answer: choice i has "index" i.
nlohmann::json completion_json(const AnswerHeader& h, const std::vector<ChoiceJson>& choices, const Usage& usage);
// A stream chunk of choice `index` with new text (and its ids); finish_reason on its last one,
// usage on the answer's last. Chat's first chunk of each choice carries the role (role_chunk).
nlohmann::json chunk_json(const AnswerHeader& h, std::int32_t index, const std::string& text,
                          const std::vector<std::int32_t>& ids, std::optional<FinishReason> finish,
                          const std::optional<Usage>& usage, nlohmann::json logprobs = nullptr,
                          bool tool_calls_finish = false);
// A chat stream chunk of one tool call (`position`: its index among the choice's calls), as vLLM
// streams them: first {index, id, type, function: {name}}, then {index, function: {arguments}}.
nlohmann::json tool_call_chunk_json(const AnswerHeader& h, std::int32_t index, std::size_t position, const ToolCall& call,
                                    bool arguments);
nlohmann::json role_chunk_json(const AnswerHeader& h, std::int32_t index);
// OpenAI's separate usage chunk (stream_options.include_usage): no choices.
nlohmann::json usage_chunk_json(const AnswerHeader& h, const Usage& usage);
nlohmann::json models_json(const std::string& model, std::int64_t created, std::int32_t context);

// The JSON text of an answer; a broken UTF-8 sequence (never expected) becomes U+FFFD rather
// than an exception.
std::string json_text(const nlohmann::json& value);
// One server-sent event: "data: <json>\n\n"; the stream ends with kSseDone.
std::string sse_event(const nlohmann::json& data);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// A comment line clients ignore: keeps a quiet stream moving so a client that left is noticed.
inline constexpr const char* kSseKeepAlive = ": keep-alive\n\n";

}  // namespace sy::http
