// Fuzzes the body parser of POST /v1/completions and /v1/chat/completions. Whatever the bytes:
// the answer is a 400 or 404 with a message (and a named field where one is at fault), or a
// request whose every value lies in the range the engine takes (ids in the vocabulary, the
// prompt and max_tokens within the context, temperature, top_p, min_p and the penalties in range, at most
// kMaxPromptChoices choices; chat's tools each a function with a name, and answers parsed for
// tool calls only where the server allows the model to choose). POST /tokenize and /detokenize
// read the same bytes (without a tokenizer: every answer a 400 or 404 with a message).
#include <cmath>
#include <string>
#include <string_view>

#include "engine/serving/http/completion_request.h"
#include "engine/serving/http/openai_shapes.h"
#include "engine/serving/http/tokenize_handler.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

constexpr const char* kTarget = "http_request";

void check(const sy::http::ParsedRequest& parsed, const sy::http::ModelLimits& limits) {
  using sy::http::ApiError;
  using sy::http::CompletionRequest;
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) {
    if (e->status != 400 && e->status != 404) fuzz_fail(kTarget, "an error that is neither 400 nor 404");
    if (e->message.empty()) fuzz_fail(kTarget, "an error without a message");
    // As the server writes it: a field name with invalid UTF-8 is echoed with U+FFFD.
    if (sy::http::json_text(e->body()).empty()) fuzz_fail(kTarget, "an error body that does not serialise");
    return;
  }
  const CompletionRequest& r = std::get<CompletionRequest>(parsed);
  const bool chat = r.endpoint == sy::http::Endpoint::ChatCompletions;
  if (chat ? !r.messages.is_array() || r.messages.empty() : r.prompts.empty())
    fuzz_fail(kTarget, "accepted without a prompt");
  if (static_cast<std::int64_t>(r.prompts.size()) * r.n > sy::http::kMaxPromptChoices)
    fuzz_fail(kTarget, "accepted more choices than prompts × n allows");
  for (std::size_t i = 0; i < r.prompts.size(); ++i) {
    const sy::http::PromptInput& p = r.prompts[i];
    if (p.text ? p.text->empty() || !p.ids.empty() : p.ids.empty()) fuzz_fail(kTarget, "accepted an empty prompt");
    for (std::int32_t id : p.ids)
      if (id < 0 || id >= limits.vocab_size) fuzz_fail(kTarget, "accepted a token id outside the vocabulary");
    if (p.text) continue;
    const auto budget = sy::http::completion_budget(r, i, static_cast<std::int32_t>(p.ids.size()), limits);
    const std::int32_t* max_tokens = std::get_if<std::int32_t>(&budget);
    if (!max_tokens || *max_tokens < (r.echo ? 0 : 1)) fuzz_fail(kTarget, "an id prompt without room for max_tokens");
    else if (static_cast<std::int64_t>(p.ids.size()) + *max_tokens > limits.context)
      fuzz_fail(kTarget, "accepted more tokens than the context holds");
  }
  for (std::int32_t id : r.stop_token_ids)
    if (id < 0 || id >= limits.vocab_size) fuzz_fail(kTarget, "accepted a stop token outside the vocabulary");
  if (!(r.temperature >= 0 && r.temperature <= 2)) fuzz_fail(kTarget, "temperature out of [0, 2]");
  if (!(r.top_p > 0 && r.top_p <= 1)) fuzz_fail(kTarget, "top_p out of (0, 1]");
  if (!(r.min_p >= 0 && r.min_p <= 1)) fuzz_fail(kTarget, "min_p out of [0, 1]");
  if (!(r.presence_penalty >= -2 && r.presence_penalty <= 2)) fuzz_fail(kTarget, "presence_penalty out of [-2, 2]");
  if (!(r.frequency_penalty >= -2 && r.frequency_penalty <= 2)) fuzz_fail(kTarget, "frequency_penalty out of [-2, 2]");
  if (!(r.repetition_penalty > 0 && std::isfinite(r.repetition_penalty))) fuzz_fail(kTarget, "repetition_penalty not > 0");
  if (r.top_k < 0 || r.top_k > limits.vocab_size) fuzz_fail(kTarget, "top_k out of range");
  for (std::size_t i = 0; i < r.logit_bias.size(); ++i) {
    const sy::kernels::TokenBias& b = r.logit_bias[i];
    if (b.token < 0 || b.token >= limits.vocab_size) fuzz_fail(kTarget, "accepted a logit bias outside the vocabulary");
    if (!(b.bias >= -100 && b.bias <= 100)) fuzz_fail(kTarget, "logit bias out of [-100, 100]");
    if (i > 0 && r.logit_bias[i - 1].token >= b.token) fuzz_fail(kTarget, "logit bias not sorted by distinct token");
  }
  if (r.include_usage && !r.stream) fuzz_fail(kTarget, "stream_options without stream");
  using Read = sy::http::CompletionRequest::ToolCallRead;
  if (r.tool_calls_read == Read::Hermes && (!chat || !limits.auto_tool_choice))
    fuzz_fail(kTarget, "tool calls parsed without --enable-auto-tool-choice");
  if ((r.tool_calls_read == Read::Named || r.tool_calls_read == Read::Required) &&
      (!chat || !r.grammar || r.guided_param != "tool_choice" || r.tools.empty()))
    fuzz_fail(kTarget, "a named or required tool choice without its grammar or tools");
  if (r.tool_calls_read == Read::Named) {
    bool known = false;
    for (const auto& t : r.tools) known = known || t["function"]["name"] == r.tool_choice_name;
    if (!known) fuzz_fail(kTarget, "a named tool choice of a function not among the tools");
  }
  if (!r.tools.is_null()) {
    if (!chat || !r.tools.is_array()) fuzz_fail(kTarget, "tools accepted outside chat or not as a list");
    for (const auto& t : r.tools)
      if (!t.is_object() || !t.contains("function") || !t["function"].contains("name") || !t["function"]["name"].is_string())
        fuzz_fail(kTarget, "a tool accepted without a function name");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const sy::http::ModelLimits limits{"tiny", 64, 100, 2};
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  check(sy::http::parse_completion_request(body, sy::http::Endpoint::Completions, limits), limits);
  check(sy::http::parse_completion_request(body, sy::http::Endpoint::ChatCompletions, limits), limits);
  sy::http::ModelLimits tools = limits;  // serve --enable-auto-tool-choice
  tools.auto_tool_choice = true;
  check(sy::http::parse_completion_request(body, sy::http::Endpoint::ChatCompletions, tools), tools);
  static const sy::http::TextSupport no_text;
  const sy::http::TokenizeHandler tokenize(limits, no_text);
  for (const auto& answer : {tokenize.tokenize(body), tokenize.detokenize(body)}) {
    const auto* e = std::get_if<sy::http::ApiError>(&answer);
    if (!e) fuzz_fail(kTarget, "/tokenize or /detokenize answered without a tokenizer");
    else if ((e->status != 400 && e->status != 404) || e->message.empty())
      fuzz_fail(kTarget, "a /tokenize or /detokenize error that is not a 400 or 404 with a message");
  }
  return 0;
}
