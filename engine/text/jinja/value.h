// The values a Jinja template computes with, modelled on the Python objects jinja2 sees when
// transformers renders a chat template: undefined, None, bool, int, float, str, list/tuple, dict
// (insertion-ordered), namespace, macro. Lists and dicts are immutable once built (the sandbox
// forbids mutating them), so copies share their storage; only a namespace changes in place.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace sy::text::jinja {

class Value;
struct MacroDef;

using List = std::vector<Value>;
using Dict = std::vector<std::pair<Value, Value>>;  // insertion order, as a Python dict keeps it

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kMacro, kFunction };

  Value() = default;  // undefined
  static Value none();
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value floating(double d);
  static Value string(std::string s);
  static Value list(List items, bool is_tuple = false);
  static Value dict(Dict items);
  static Value namespace_(Dict items);
  static Value macro(std::shared_ptr<const MacroDef> def);
  // A global callable (raise_exception, namespace, range, ...), called with evaluated arguments.
  static Value function(std::string name);
  // Undefined with the name jinja2 would put in its message ("'x' is undefined").
  static Value undefined(std::string hint);

  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_macro() const { return kind_ == Kind::kMacro; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return b_; }
  std::int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double as_float() const;  // any number
  const std::string& as_string() const { return *s_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& namespace_attrs() const { return *dict_; }
  const MacroDef& as_macro() const { return *macro_; }
  const std::string& function_name() const { return *s_; }
  const std::string& undefined_hint() const { return s_ ? *s_ : empty_string(); }

  // Python truthiness.
  bool truthy() const;
  // Dict lookup by key (Python equality); nullptr when absent.
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;

  // Type name in jinja2's messages ("str", "int", "dict", "list", ...).
  std::string type_name() const;

 private:
  static const std::string& empty_string();
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  std::int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const MacroDef> macro_;
};

// Python ==: 1 == 1.0 == True, lists and dicts element-wise, undefined equals only undefined.
bool equals(const Value& a, const Value& b);

}  // namespace sy::text::jinja
