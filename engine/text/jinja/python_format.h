// How Python turns values into text, as a rendered chat template shows them: str() for {{ x }}
// (True, None, 1.0, ['a', 1]), repr() inside containers, and json.dumps for the tojson filter
// transformers installs (ensure_ascii=False, optional indent, separators and sort_keys).
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "engine/text/jinja/python_string.h"
#include "engine/text/jinja/value.h"

namespace sy::text::jinja {

std::string py_float_repr(double d);
// str(v) and repr(v) appended to `out`. A list can hold one large string millions of times, so
// a container stops at its next item once `out` is full.
void append_str(BoundedText& out, const Value& v);
void append_repr(BoundedText& out, const Value& v);
// str(v) of at most `limit` bytes; a larger one is an error naming it ("printing a list: ...").
StatusOr<std::string> py_str(const Value& v, std::size_t limit);
// repr(v) for an error message: cut short with "..." past a few hundred bytes, as a message
// about a value need not carry all of it.
std::string repr_for_message(const Value& v);

struct JsonOptions {
  std::optional<std::string> indent;  // json.dumps indent: spaces or the given string; absent: one line
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key) separators
  bool sort_keys = false;
  bool ensure_ascii = false;  // escape non-ASCII as \uXXXX (surrogate pairs above U+FFFF)
};

// json.dumps of at most `limit` bytes, checked as it grows ("tojson: the result exceeds ...");
// errors name what cannot be serialised ("Object of type Undefined is not JSON serializable").
StatusOr<std::string> py_json_dumps(const Value& v, const JsonOptions& options, std::size_t limit);

}  // namespace sy::text::jinja
