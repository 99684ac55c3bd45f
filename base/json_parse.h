// Parses JSON from outside (control messages, config.json, safetensors headers, index files,
// prompt files) into a Status: every failure of the parser, including numbers out of a double's
// range, becomes a message; no library exception reaches the caller.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace sy {

// The whole of `text` must be one JSON value. The message says what is wrong and where
// ("syntax error while parsing value - invalid literal; last read: 'x' at line 1, column 2",
// "number overflow parsing '1e400': numbers must lie within the range of a double (about
// ±1.8e308)"), without the parser's bracketed exception id; callers prefix the thing it came
// from.
StatusOr<nlohmann::json> parse_json(std::string_view text);

}  // namespace sy
