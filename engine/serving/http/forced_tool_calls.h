// tool_choice "required" and a named function, as vLLM answers them: the answer is guided by a
// grammar made from the tools (the schemas here), then read back into OpenAI's tool_calls.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/serving/http/hermes_tool_parser.h"

namespace sy::http {

// The schema a named function's arguments follow: its parameters, or any object where it has
// none (vLLM leaves such a call unguided; its arguments must still be a JSON object).
nlohmann::ordered_json named_tool_schema(const nlohmann::ordered_json& tool);

// vLLM's schema for "required" (ChatCompletionRequest._get_guided_json_from_tool): a non-empty
// array whose items are any tool's {"name": its name, "parameters": its parameters (an empty
// object's schema where it has none)}, with every tool's "$defs" gathered at the top. An error
// names the definition when two tools define one name differently, as vLLM refuses them.
StatusOr<nlohmann::ordered_json> required_tool_calls_schema(const nlohmann::ordered_json& tools);

// A named function's answer: the whole text is its arguments (content "", as vLLM).
ToolCallParse named_tool_call(const std::string& name, std::string_view text);

// A "required" answer: the JSON list of {"name", "parameters"}, each item a call whose arguments
// are its parameters as json.dumps writes them (content ""). Text that is no such list (an answer
// cut by max_tokens) stays the content, with no call.
ToolCallParse required_tool_calls(std::string_view text);

}  // namespace sy::http
