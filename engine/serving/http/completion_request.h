// The body of POST /v1/completions and /v1/chat/completions, parsed and checked against the
// model before anything reaches the engine: every wrong type or out-of-range value becomes a
// 400 naming the field. Unknown fields are ignored, as OpenAI's and vLLM's servers do.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/serving/http/api_error.h"
#include "engine/structured/grammar.h"
#include "kernels/cpu/sampling.h"

namespace sy::http {

enum class Endpoint : std::uint8_t { Completions, ChatCompletions };

// What the served model allows.
struct ModelLimits {
  std::string name;               // the "model" a request may name (any other is a 404)
  std::int32_t context = 0;       // prompt + completion tokens at most
  std::int32_t vocab_size = 0;    // token ids lie in [0, vocab_size)
  std::optional<std::int32_t> eos_token_id;  // requests stop after it unless they ignore_eos
  // The backend computes logits (cpu, cuda); the sim does not, and requests that need the
  // prompt's log-probabilities (echo with logprobs, prompt_logprobs) are refused there.
  bool logits = true;
  // serve --enable-auto-tool-choice with a --tool-call-parser (hermes): chat requests with tools
  // may leave the choice to the model (tool_choice "auto"), and their answers are parsed for calls.
  bool auto_tool_choice = false;
  // Why this server refuses guided decoding (response_format json_object/json_schema,
  // structured_outputs): the sim backend computes no logits to mask; attention ranks in other
  // processes do not receive the constraint. Empty: served (with the model's tokenizer).
  std::string no_guided_reason{};
};

// The most choices (`n`) one request may ask for: each runs as a request of its own.
inline constexpr std::int32_t kMaxChoices = 16;
// The most choices one completions request may ask for over all its prompts (prompts × n):
// every one is an engine request, submitted together, and the answer holds them all.
inline constexpr std::int32_t kMaxPromptChoices = 256;

// One prompt of a completions request: token ids (checked against the vocabulary), or text
// (encoded by the handler, which needs the tokenizer).
struct PromptInput {
  std::vector<std::int32_t> ids;
  std::optional<std::string> text;
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::int32_t n = 1;  // choices per prompt, each sampled on its own (seed + i)
  // Completions: the prompts, in order (one, or a list: OpenAI's batch form); each gets n choices.
  std::vector<PromptInput> prompts;
  // The prompt came as a list ([string] or [[ids]]): errors name prompt[i], not prompt.
  bool prompt_list = false;
  // Chat: [{"role", "content", …}] with content flattened to a string and tool calls' arguments
  // as objects, ready for the template (ordered: tojson prints keys as the client wrote them).
  nlohmann::ordered_json messages;
  // Chat: the tools as vLLM hands them to the template (null: none given).
  nlohmann::ordered_json tools;
  // Chat: the template's generation prompt (vLLM's default true), or the final message
  // continued instead (continue_final_message; the two exclude each other).
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  // Chat: how the answers' tool calls are read. None: not at all ("none" renders the tools and
  // leaves the text alone, as vLLM). Hermes: tool_choice "auto" with the server's
  // --enable-auto-tool-choice, the hermes parser. Named (a function named by tool_choice) and
  // Required ("required"): the answer is guided by `grammar`, made from the tools as vLLM makes
  // it (forced_tool_calls.h), and read back as that function's arguments or as the list of calls.
  enum class ToolCallRead { None, Hermes, Named, Required };
  ToolCallRead tool_calls_read = ToolCallRead::None;
  std::string tool_choice_name;  // Named: the function
  // OpenAI's parallel_tool_calls: taken, not enforced (every call the model writes is returned,
  // as vLLM's hermes parser does).
  bool parallel_tool_calls = true;
  // As given; unset: per prompt, 16 (completions, as OpenAI) or the rest of the context (chat):
  // completion_budget().
  std::optional<std::int32_t> max_tokens;
  float temperature = 1.0f;  // OpenAI's default
  float top_p = 1.0f;
  float min_p = 0.0f;              // vLLM's extension; 0: off
  float presence_penalty = 0.0f;   // OpenAI's, in [-2, 2]
  float frequency_penalty = 0.0f;  // OpenAI's, in [-2, 2]
  float repetition_penalty = 1.0f; // vLLM's extension, > 0; 1: off
  std::vector<kernels::TokenBias> logit_bias;  // OpenAI's, sorted by token
  std::int32_t top_k = 0;    // vLLM's extension; 0 or -1: off
  std::optional<std::uint64_t> seed;
  std::vector<std::string> stop;               // stop strings (need the tokenizer)
  std::vector<std::int32_t> stop_token_ids;    // vLLM's extension
  bool ignore_eos = false;                     // vLLM's extension
  bool stream = false;
  bool include_usage = false;                  // stream_options.include_usage
  // -1: no log-probabilities; k ≥ 0: the chosen token's and k alternatives' (completions'
  // logprobs: k; chat's logprobs: true with top_logprobs: k).
  std::int32_t logprobs = -1;
  // Completions: the answer's text (and with logprobs its log-probabilities) begins with the
  // prompt's, as OpenAI's legacy API and vLLM do; max_tokens may then be 0 (the prompt alone).
  bool echo = false;
  // vLLM's extension (completions): -1: none; k ≥ 0: the choice's "prompt_logprobs", every prompt
  // token's log-probability with its rank and k alternatives.
  std::int32_t prompt_logprobs = -1;
  // Guided decoding (structured output): the grammar every choice's text follows (null: free
  // text), and the field that asked for it ("response_format" or "structured_outputs").
  std::shared_ptr<const structured::Grammar> grammar{};
  std::string guided_param{};
  // The alternatives the engine computes for each prompt token (SamplingSpec::prompt_logprobs):
  // prompt_logprobs' and, with echo, logprobs' (the larger); -1: the prompt is not scored.
  std::int32_t engine_prompt_logprobs() const {
    return std::max(prompt_logprobs, echo ? logprobs : -1);
  }
  // How errors name prompt i: "prompt[i]" for a list of prompts, "prompt" for the one prompt
  // given bare, "messages" for chat.
  std::string prompt_param(std::size_t i) const {
    if (endpoint == Endpoint::ChatCompletions) return "messages";
    return prompt_list ? "prompt[" + std::to_string(i) + "]" : "prompt";
  }
};

using ParsedRequest = std::variant<CompletionRequest, ApiError>;

// What a request's field holds, for errors: "an integer", "a number", "a string", "an object"...
template <class Json>
std::string json_kind(const Json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  return std::string("a") + (v.is_object() || v.is_array() ? "n " : " ") + v.type_name();
}

// A request's "model" (null or absent: the served model, as vLLM takes it): a 400 when it is not
// a string, a 404 (model_not_found) when it names another model; every endpoint checks it so.
std::optional<ApiError> check_model_field(const nlohmann::json* model, const ModelLimits& limits);

// Parses and checks the body; token ids are checked against the vocabulary, the length of each
// id prompt against the context. Text prompts and chat messages are length-checked once encoded
// (completion_budget).
ParsedRequest parse_completion_request(std::string_view body, Endpoint endpoint, const ModelLimits& limits);

// The tokens the choices of prompt `index` (of `prompt_tokens` tokens) may generate: max_tokens
// when given, else its default. An error when the prompt leaves no room in the context or
// max_tokens does not fit what is left; the message says the lengths, as vLLM's does, and names
// the prompt (request.prompt_param).
std::variant<std::int32_t, ApiError> completion_budget(const CompletionRequest& request, std::size_t index,
                                                       std::int32_t prompt_tokens, const ModelLimits& limits);

}  // namespace sy::http
