// JSON text as Python's json.dumps(value, ensure_ascii=False) writes it, which is how vLLM
// writes a tool call's arguments: ", " and ": " between items, keys in their order, non-ASCII as is.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace sy::http {

// Appends `value`'s text to `out`.
void python_dumps(const nlohmann::ordered_json& value, std::string& out);

}  // namespace sy::http
