// Parses Jinja template text into a syntax tree with jinja2's grammar and operator precedence.
// Constructs outside the supported subset (include, extends, import, block, call, filter blocks,
// unknown filters and tests) are errors naming the construct and where it is.
#pragma once

#include <string_view>

#include "base/status.h"
#include "engine/text/jinja/ast.h"

namespace sy::text::jinja {

// Errors read "origin:line:col: message".
StatusOr<Template> parse_template(std::string_view source, std::string_view origin);

}  // namespace sy::text::jinja
