#include "engine/text/jinja/value.h"

#include <cmath>

namespace sy::text::jinja {

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}

Value Value::integer(std::int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::floating(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.d_ = d;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::list(List items, bool is_tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.tuple_ = is_tuple;
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::dict(Dict items) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<Dict>(std::move(items));
  return v;
}

Value Value::namespace_(Dict items) {
  Value v = dict(std::move(items));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::macro(std::shared_ptr<const MacroDef> def) {
  Value v;
  v.kind_ = Kind::kMacro;
  v.macro_ = std::move(def);
  return v;
}

Value Value::function(std::string name) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  return v;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

const std::string& Value::empty_string() {
  static const std::string empty;
  return empty;
}

namespace {

template <class Json>
Value convert(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.template get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(u));
      return Value::integer(static_cast<std::int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::floating(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(convert(e));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(Value::string(it.key()), convert(it.value()));
      return Value::dict(std::move(items));
    }
    default: return Value::none();  // binary and discarded values do not come from JSON text
  }
}

}  // namespace

Value Value::from_json(const nlohmann::json& j) { return convert(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return convert(j); }

double Value::as_float() const {
  switch (kind_) {
    case Kind::kFloat: return d_;
    case Kind::kInt: return static_cast<double>(i_);
    case Kind::kBool: return b_ ? 1.0 : 0.0;
    default: return 0.0;
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return d_ != 0.0;
    case Kind::kString: return !s_->empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return !dict_->empty();
    default: return true;
  }
}

const Value* Value::find(const Value& key) const {
  if (!dict_) return nullptr;
  for (const auto& [k, v] : *dict_)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* Value::find(std::string_view key) const {
  if (!dict_) return nullptr;
  for (const auto& [k, v] : *dict_)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return tuple_ ? "tuple" : "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kMacro: return "Macro";
    case Kind::kFunction: return "function";
  }
  return "object";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      const auto& x = a.as_dict();
      if (x.size() != b.as_dict().size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace: return &a.namespace_attrs() == &b.namespace_attrs();
    case Value::Kind::kMacro: return &a.as_macro() == &b.as_macro();
    case Value::Kind::kFunction: return a.function_name() == b.function_name();
    default: return false;
  }
}

}  // namespace sy::text::jinja
