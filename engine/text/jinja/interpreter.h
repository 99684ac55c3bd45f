// Renders a parsed Jinja template against a context, with jinja2's semantics as transformers
// configures it (undefined values, scoping of set/for/macro, loop variables, loopcontrols).
// Templates come from checkpoints, so the work, the output and macro recursion are bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "engine/text/jinja/ast.h"
#include "engine/text/jinja/value.h"

namespace sy::text::jinja {

// What a list counts for per item, against max_output_bytes (its length) and max_value_bytes.
inline constexpr std::size_t kListItemBytes = 8;

struct RenderLimits {
  // The output, and any one string or list (a list max_output_bytes / kListItemBytes items),
  // checked as builtins build them: printing, tojson, join, replace, ...
  std::size_t max_output_bytes = std::size_t{64} << 20;
  std::int64_t max_steps = 2'000'000;  // expressions evaluated plus statements executed
  int max_call_depth = 200;             // nested macro calls
  // Bytes of the values expressions yield (a string its length, a list 8 per item) plus the
  // text written, over the whole render: a step may copy or scan a value of up to
  // max_output_bytes, so steps alone do not bound the time. 16 times the value limit (about a
  // second of copying) leaves room for a prompt near the output limit read several times over.
  std::size_t max_value_bytes = std::size_t{1} << 30;
};

// `context` must be a dict: its keys become the template's variables. Errors read
// "origin:line:col: message".
StatusOr<std::string> render(const Template& tmpl, const Value& context, const RenderLimits& limits = {});

}  // namespace sy::text::jinja
