// The filters, tests, global functions and str/dict/list methods templates may call, with the
// semantics of jinja2's defaults plus transformers' additions (tojson, raise_exception,
// strftime_now). The parser checks names against these lists so that an unknown filter or test
// is an error when the template is loaded, as it is in jinja2.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/text/jinja/interpreter.h"
#include "engine/text/jinja/value.h"

namespace sy::text::jinja {

bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);
bool is_global_function(std::string_view name);

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Calls back into the interpreter for filters and tests that take the name of another
// (map('upper'), select('odd'), selectattr('x', 'equalto', 1)), and for the render's limits:
// a builtin can build a result far larger than its operands, so it checks as it builds.
class Callbacks {
 public:
  virtual ~Callbacks() = default;
  // The result is bounded and counted against the render's budget as an expression's value is.
  virtual StatusOr<Value> call_filter(const std::string& name, const Value& operand, const Args& args) = 0;
  virtual StatusOr<bool> call_test(const std::string& name, const Value& operand, const Args& args) = 0;
  // RenderLimits::max_output_bytes: the most bytes one string may hold.
  virtual std::size_t value_limit() const = 0;
  std::size_t max_items() const { return value_limit() / kListItemBytes; }  // the most one list may hold
  // Counts bytes a builtin computes outside any expression (sort keys) against
  // RenderLimits::max_value_bytes.
  virtual Status charge(std::size_t bytes) = 0;
};

StatusOr<Value> apply_filter(const std::string& name, const Value& operand, const Args& args, Callbacks& cb);
StatusOr<bool> apply_test(const std::string& name, const Value& operand, const Args& args, Callbacks& cb);
// What a for loop, unpacking and the list filter walk over: list items, dict keys, string
// characters; undefined is empty.
StatusOr<List> to_list(const Value& v, Callbacks& cb);
// Global functions other than macros (namespace, range, dict, raise_exception, strftime_now).
StatusOr<Value> call_global(const std::string& name, const Args& args, Callbacks& cb);
// obj.method(args) for str, dict and list methods; `found` false when there is no such method.
StatusOr<Value> call_method(const Value& obj, const std::string& method, const Args& args, Callbacks& cb,
                            bool& found);

}  // namespace sy::text::jinja
