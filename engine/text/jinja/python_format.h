// How Python turns values into text, as a rendered chat template shows them: str() for {{ x }}
// (True, None, 1.0, ['a', 1]), repr() inside containers, and json.dumps for the tojson filter
// transformers installs (ensure_ascii=False, optional indent, separators and sort_keys).
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "engine/text/jinja/value.h"

namespace sy::text::jinja {

std::string py_float_repr(double d);
std::string py_str(const Value& v);
std::string py_repr(const Value& v);

struct JsonOptions {
  std::optional<std::string> indent;  // json.dumps indent: spaces or the given string; absent: one line
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key) separators
  bool sort_keys = false;
  bool ensure_ascii = false;  // escape non-ASCII as \uXXXX (surrogate pairs above U+FFFF)
};

// json.dumps; errors name what cannot be serialised ("Object of type Undefined is not JSON serializable").
StatusOr<std::string> py_json_dumps(const Value& v, const JsonOptions& options);

}  // namespace sy::text::jinja
