// Splits a Jinja template into tokens the way jinja2's lexer does with transformers' settings
// (trim_blocks and lstrip_blocks on, keep_trailing_newline off): text between tags with the
// whitespace control already applied, tag delimiters, and the names, literals and operators inside.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sy::text::jinja {

struct Token {
  enum class Kind { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };
  Kind kind;
  std::string text;  // text, name, operator, decoded string literal, or the digits of a number
  int line = 1;
  int col = 1;
};

// Errors read "origin:line:col: message".
StatusOr<std::vector<Token>> tokenize(std::string_view source, std::string_view origin);

}  // namespace sy::text::jinja
