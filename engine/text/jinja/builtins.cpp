#include "engine/text/jinja/builtins.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <set>

#include "engine/text/jinja/interpreter.h"
#include "engine/text/jinja/python_format.h"
#include "engine/text/jinja/python_string.h"

namespace sy::text::jinja {
namespace {

const std::set<std::string, std::less<>> kFilters = {
    "abs",     "capitalize", "count",  "d",       "default", "dictsort",   "first", "float",   "indent",
    "int",     "items",      "join",   "last",    "length",  "list",       "lower", "map",     "reject",
    "rejectattr", "replace", "reverse", "safe",   "select",  "selectattr", "sort",  "string",  "sum",
    "title",   "tojson",     "trim",   "unique",  "upper"};

const std::set<std::string, std::less<>> kTests = {
    "defined", "undefined", "none",  "string", "mapping", "sequence", "iterable", "number", "integer",
    "float",   "boolean",   "true",  "false",  "odd",     "even",     "divisibleby", "eq", "equalto",
    "==",      "ne",        "!=",    "lt",     "lessthan", "<",       "le",       "<=",    "gt",
    "greaterthan", ">",     "ge",    ">=",     "in",      "sameas",   "callable", "lower", "upper"};

const std::set<std::string, std::less<>> kGlobals = {"range", "namespace", "dict", "raise_exception",
                                                     "strftime_now"};

// Argument `index` by position or `name` by keyword.
const Value* arg(const Args& a, std::size_t index, std::string_view name) {
  if (index < a.positional.size()) return &a.positional[index];
  for (const auto& [k, v] : a.keyword)
    if (k == name) return &v;
  return nullptr;
}

Status check_args(const Args& a, std::size_t max_positional, std::initializer_list<std::string_view> names,
                  const std::string& what) {
  if (a.positional.size() > max_positional)
    return Status::Error(what + " takes at most " + std::to_string(max_positional) + " positional argument(s)");
  for (const auto& [k, v] : a.keyword)
    if (std::find(names.begin(), names.end(), k) == names.end())
      return Status::Error(what + " got an unexpected keyword argument '" + k + "'");
  return Status::Ok();
}

StatusOr<std::optional<std::string>> opt_string(const Value* v, Callbacks& cb) {
  if (!v || v->is_none() || v->is_undefined()) return std::optional<std::string>();
  auto s = py_str(*v, cb.value_limit());
  if (!s.ok()) return s.status();
  return std::optional(std::move(*s));
}

// A string value from text built within the limit.
StatusOr<Value> string_value(BoundedText& text) {
  auto s = text.take();
  if (!s.ok()) return s.status();
  return Value::string(std::move(*s));
}

StatusOr<std::int64_t> int_arg(const Value* v, std::int64_t def, const std::string& what) {
  if (!v || v->is_none()) return def;
  if (!v->is_int() && !v->is_bool()) return Status::Error(what + " must be an integer, not " + v->type_name());
  return v->as_int();
}


StatusOr<std::int64_t> length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<std::int64_t>(py_len(v.as_string()));
    case Value::Kind::kList: return static_cast<std::int64_t>(v.as_list().size());
    case Value::Kind::kDict: return static_cast<std::int64_t>(v.as_dict().size());
    default: return Status::Error("object of type '" + v.type_name() + "' has no len()");
  }
}

// jinja2's environment.getattr for attribute= arguments; dotted paths and integer parts index.
Value attribute_of(const Value& item, const std::string& path) {
  Value cur = item;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const Value* next = nullptr;
    if (cur.is_dict() || cur.is_namespace()) {
      next = cur.find(part);
      if (!next && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit))
        next = cur.find(Value::integer(std::strtoll(part.c_str(), nullptr, 10)));
    } else if (cur.is_list() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      const auto i = static_cast<std::size_t>(std::strtoll(part.c_str(), nullptr, 10));
      if (i < cur.as_list().size()) next = &cur.as_list()[i];
    }
    if (!next) return Value::undefined("'" + cur.type_name() + " object' has no attribute '" + part + "'");
    cur = *next;
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Sort key as jinja2's sort/unique/dictsort make it: strings lowercased unless case_sensitive.
// A lowered string is a new value, counted against the render's budget: a list can hold one
// large string many times, and each item gets a key of its own.
StatusOr<Value> sort_key(const Value& v, bool case_sensitive, Callbacks& cb) {
  if (case_sensitive || !v.is_string()) return v;
  SY_RETURN_IF_ERROR(cb.charge(v.as_string().size()));
  return Value::string(py_lower(v.as_string()));
}

StatusOr<int> py_order(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.as_float(), y = b.as_float();
    if (!a.is_float() && !b.is_float()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return py_order(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return Status::Error("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

StatusOr<List> sorted(List items, const std::vector<Value>& keys, bool reverse) {
  std::vector<std::size_t> idx(items.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  Status err;
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    auto o = reverse ? py_order(keys[b], keys[a]) : py_order(keys[a], keys[b]);
    if (!o.ok()) {
      err = o.status();
      return false;
    }
    return *o < 0;
  });
  if (!err.ok()) return err;
  List out;
  for (std::size_t i : idx) out.push_back(items[i]);
  return out;
}

// Calls f with each line of s as str.splitlines() splits it, until f returns false: a string of
// newlines has as many lines as bytes, too many to collect before counting them.
template <class F>
void for_each_line(const std::string& s, F f) {
  std::u32string cur;
  const std::u32string text = utf8_decode(s);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      cur.push_back(c);
      continue;
    }
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    if (!f(utf8_encode(cur))) return;
    cur.clear();
  }
  if (!cur.empty()) f(utf8_encode(cur));
}

StatusOr<Value> to_int(const Value& v, const Value& def) {
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
  if (v.is_float()) {
    const double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return def;
    return Value::integer(static_cast<std::int64_t>(d));
  }
  if (v.is_string()) {
    std::string s = py_strip(v.as_string(), std::nullopt, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    if (!s.empty()) {
      errno = 0;
      char* end = nullptr;
      const long long i = std::strtoll(s.c_str(), &end, 10);
      if (errno == 0 && end && *end == '\0') return Value::integer(i);
      const double d = std::strtod(s.c_str(), &end);
      if (end && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18)
        return Value::integer(static_cast<std::int64_t>(d));
    }
    return def;
  }
  if (v.is_undefined()) return Status::Error(v.undefined_hint());
  return def;
}

StatusOr<Value> to_float(const Value& v, const Value& def) {
  if (v.is_number()) return Value::floating(v.as_float());
  if (v.is_string()) {
    const std::string s = py_strip(v.as_string(), std::nullopt, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value::floating(d);
    return def;
  }
  if (v.is_undefined()) return Status::Error(v.undefined_hint());
  return def;
}

StatusOr<Value> tojson(const Value& v, const Args& a, Callbacks& cb) {
  SY_RETURN_IF_ERROR(check_args(a, 4, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson"));
  JsonOptions o;
  if (const Value* x = arg(a, 0, "ensure_ascii")) o.ensure_ascii = x->truthy();
  if (const Value* x = arg(a, 1, "indent"); x && !x->is_none()) {
    if (x->is_string()) o.indent = x->as_string();
    else if (x->is_int() || x->is_bool()) o.indent = std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, x->as_int())), ' ');
    else return Status::Error("tojson: indent must be an integer or a string");
  }
  if (const Value* x = arg(a, 2, "separators"); x && !x->is_none()) {
    if (!x->is_list() || x->as_list().size() != 2 || !x->as_list()[0].is_string() || !x->as_list()[1].is_string())
      return Status::Error("tojson: separators must be a pair of strings");
    o.separators = std::make_pair(x->as_list()[0].as_string(), x->as_list()[1].as_string());
  }
  if (const Value* x = arg(a, 3, "sort_keys")) o.sort_keys = x->truthy();
  auto s = py_json_dumps(v, o, cb.value_limit());
  if (!s.ok()) return s.status();
  return Value::string(std::move(*s));
}

// select/reject and selectattr/rejectattr.
StatusOr<Value> select(const Value& v, const Args& a, bool attr, bool keep, Callbacks& cb) {
  if (!v.truthy()) return Value::list({});  // jinja2 skips a false value without iterating it
  auto items = to_list(v, cb);
  if (!items.ok()) return items.status();
  std::size_t first_test = 0;
  std::string attribute;
  if (attr) {
    if (a.positional.empty() || !a.positional[0].is_string())
      return Status::Error(std::string(keep ? "selectattr" : "rejectattr") + " needs an attribute name");
    attribute = a.positional[0].as_string();
    first_test = 1;
  }
  std::string test;
  Args test_args;
  if (a.positional.size() > first_test) {
    if (!a.positional[first_test].is_string()) return Status::Error("the test name must be a string");
    test = a.positional[first_test].as_string();
    if (!is_known_test(test)) return Status::Error("unsupported test '" + test + "'");
    test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(first_test) + 1, a.positional.end());
  }
  List out;
  for (const auto& item : *items) {
    const Value probe = attr ? attribute_of(item, attribute) : item;
    bool pass;
    if (test.empty()) {
      pass = probe.truthy();
    } else {
      auto r = cb.call_test(test, probe, test_args);
      if (!r.ok()) return r.status();
      pass = *r;
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

StatusOr<Value> map_filter(const Value& v, const Args& a, Callbacks& cb) {
  if (!v.truthy()) return Value::list({});
  auto items = to_list(v, cb);
  if (!items.ok()) return items.status();
  List out;
  if (a.positional.empty()) {
    const Value* attribute = arg(a, 99, "attribute");
    if (!attribute || !attribute->is_string()) return Status::Error("map needs a filter name or attribute=");
    const Value* def = arg(a, 99, "default");
    for (const auto& item : *items) {
      Value x = attribute_of(item, attribute->as_string());
      if (x.is_undefined() && def) x = *def;
      out.push_back(std::move(x));
    }
    return Value::list(std::move(out));
  }
  if (!a.positional[0].is_string()) return Status::Error("map: the filter name must be a string");
  const std::string filter = a.positional[0].as_string();
  if (!is_known_filter(filter)) return Status::Error("unsupported filter '" + filter + "'");
  Args rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keyword = a.keyword;
  for (const auto& item : *items) {
    auto r = cb.call_filter(filter, item, rest);
    if (!r.ok()) return r.status();
    out.push_back(std::move(*r));
  }
  return Value::list(std::move(out));
}

StatusOr<Value> indent(const Value& v, const Args& a, Callbacks& cb) {
  SY_RETURN_IF_ERROR(check_args(a, 3, {"width", "first", "blank"}, "indent"));
  std::string ind = "    ";
  if (const Value* w = arg(a, 0, "width")) {
    if (w->is_string()) ind = w->as_string();
    else if (w->is_int() || w->is_bool()) ind = std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, w->as_int())), ' ');
    else return Status::Error("indent: width must be an integer or a string");
  }
  // do_indent appends "\n" to its operand: only strings work.
  if (v.is_undefined()) return Status::Error(v.undefined_hint());
  if (!v.is_string()) return Status::Error("unsupported operand type(s) for +=: '" + v.type_name() + "' and 'str'");
  const Value* first = arg(a, 1, "first");
  const Value* blank = arg(a, 2, "blank");
  const bool indent_blank = blank && blank->truthy();
  // Every line gets the width string: many lines and a long one make a result of their product.
  BoundedText rv("indent", cb.value_limit());
  if (first && first->truthy()) rv += ind;
  bool first_line = true;
  for_each_line(v.as_string() + "\n", [&](const std::string& line) {
    if (!first_line) {
      rv += "\n";
      if (indent_blank || !line.empty()) rv += ind;
    }
    first_line = false;
    rv += line;
    return !rv.full();
  });
  return string_value(rv);
}

// The first or last character of a non-empty string, as to_list would give it, without a list
// of them all (a string may have more characters than a list may have items). A lead byte always
// starts a character when decoding forward, so the last one starts at most 3 bytes from the end;
// bytes that do not make it up to the end are invalid, U+FFFD.
Value end_character(const std::string& s, bool last) {
  std::size_t i = 0;
  if (last) {
    i = s.size() - 1;
    for (int k = 0; k < 3 && i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; ++k) --i;
  }
  char32_t c = utf8_next(s, i);
  if (last && i != s.size()) c = 0xFFFD;
  std::string out;
  utf8_append(out, c);
  return Value::string(std::move(out));
}

// The filters that work on their operand printed: string, trim, upper, lower, title,
// capitalize, replace.
StatusOr<Value> string_filter(const std::string& name, const std::string& s, const Args& a, Callbacks& cb) {
  if (name == "string") return Value::string(s);
  if (name == "trim") {
    SY_RETURN_IF_ERROR(check_args(a, 1, {"chars"}, name));
    auto chars = opt_string(arg(a, 0, "chars"), cb);
    if (!chars.ok()) return chars.status();
    return Value::string(py_strip(s, *chars, true, true));
  }
  if (name == "upper") return Value::string(py_upper(s));
  if (name == "lower") return Value::string(py_lower(s));
  if (name == "title") {
    // jinja2's do_title: words begin after whitespace or one of - ( { [ <.
    std::string out;
    bool word_start = true;
    for (char32_t c : utf8_decode(s)) {
      const bool sep = py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      const std::string one = utf8_encode(std::u32string(1, c));
      out += sep ? one : word_start ? py_upper(one) : py_lower(one);
      word_start = sep;
    }
    return Value::string(std::move(out));
  }
  if (name == "capitalize") return Value::string(py_capitalize(s));
  // replace
  SY_RETURN_IF_ERROR(check_args(a, 3, {"old", "new", "count"}, name));
  const Value* old_v = arg(a, 0, "old");
  const Value* new_v = arg(a, 1, "new");
  if (!old_v || !new_v) return Status::Error("replace needs the old and the new text");
  auto count = int_arg(arg(a, 2, "count"), -1, "replace count");
  if (!count.ok()) return count.status();
  auto old_text = py_str(*old_v, cb.value_limit());
  if (!old_text.ok()) return old_text.status();
  auto new_text = py_str(*new_v, cb.value_limit());
  if (!new_text.ok()) return new_text.status();
  BoundedText out("replace", cb.value_limit());
  py_replace(out, s, *old_text, *new_text, *count);
  return string_value(out);
}

}  // namespace

StatusOr<List> to_list(const Value& v, Callbacks& cb) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return List{};
    case Value::Kind::kList: return v.as_list();
    case Value::Kind::kDict: {
      if (v.as_dict().size() > cb.max_items()) return result_too_long("the keys of a dict", cb.max_items());
      List keys;
      for (const auto& [k, x] : v.as_dict()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      // A value of one character each: a string of the byte limit would make that many items.
      if (py_len(v.as_string()) > cb.max_items()) return result_too_long("the characters of a string", cb.max_items());
      List out;
      for (char32_t c : utf8_decode(v.as_string())) {
        std::string s;
        utf8_append(s, c);
        out.push_back(Value::string(std::move(s)));
      }
      return out;
    }
    default: return Status::Error("'" + v.type_name() + "' object is not iterable");
  }
}

bool is_known_filter(std::string_view name) { return kFilters.count(name) != 0; }
bool is_known_test(std::string_view name) { return kTests.count(name) != 0; }
bool is_global_function(std::string_view name) { return kGlobals.count(name) != 0; }

StatusOr<Value> apply_filter(const std::string& name, const Value& v, const Args& a, Callbacks& cb) {
  if (name == "default" || name == "d") {
    SY_RETURN_IF_ERROR(check_args(a, 2, {"default_value", "boolean"}, name));
    const Value* def = arg(a, 0, "default_value");
    const Value* boolean = arg(a, 1, "boolean");
    const bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
    if (use_default) return def ? *def : Value::string("");
    return v;
  }
  if (name == "length" || name == "count") {
    auto n = length(v);
    if (!n.ok()) return n.status();
    return Value::integer(*n);
  }
  if (name == "tojson") return tojson(v, a, cb);
  if (name == "safe") return v;
  if (name == "string" || name == "trim" || name == "upper" || name == "lower" || name == "title" ||
      name == "capitalize" || name == "replace") {
    // These print their operand first: a list prints as its repr.
    auto text = py_str(v, cb.value_limit());
    if (!text.ok()) return text.status();
    return string_filter(name, *text, a, cb);
  }
  if (name == "int") {
    SY_RETURN_IF_ERROR(check_args(a, 2, {"default", "base"}, name));
    const Value* def = arg(a, 0, "default");
    if (const Value* base = arg(a, 1, "base"); base && !(base->is_int() && base->as_int() == 10))
      return Status::Error("int: only base 10 is supported");
    return to_int(v, def ? *def : Value::integer(0));
  }
  if (name == "float") {
    SY_RETURN_IF_ERROR(check_args(a, 1, {"default"}, name));
    const Value* def = arg(a, 0, "default");
    return to_float(v, def ? *def : Value::floating(0.0));
  }
  if (name == "abs") {
    if (v.is_float()) return Value::floating(std::fabs(v.as_float()));
    if (v.is_int() || v.is_bool()) {
      if (v.as_int() == INT64_MIN) return Status::Error("integer overflow");
      return Value::integer(std::llabs(v.as_int()));
    }
    return Status::Error("bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (name == "list") {
    auto items = to_list(v, cb);
    if (!items.ok()) return items.status();
    return Value::list(std::move(*items));
  }
  if (name == "join") {
    SY_RETURN_IF_ERROR(check_args(a, 2, {"d", "attribute"}, name));
    const Value* sep = arg(a, 0, "d");
    const Value* attribute = arg(a, 1, "attribute");
    auto items = to_list(v, cb);
    if (!items.ok()) return items.status();
    auto separator = sep ? py_str(*sep, cb.value_limit()) : StatusOr<std::string>(std::string());
    if (!separator.ok()) return separator.status();
    BoundedText out("join", cb.value_limit());
    for (std::size_t i = 0; i < items->size() && !out.full(); ++i) {
      if (i) out += *separator;
      const Value& item = (*items)[i];
      append_str(out, attribute && attribute->is_string() ? attribute_of(item, attribute->as_string()) : item);
    }
    return string_value(out);
  }
  if (name == "first" || name == "last") {
    if (v.is_string() && !v.as_string().empty()) return end_character(v.as_string(), name == "last");
    auto items = to_list(v, cb);
    if (!items.ok()) return items.status();
    if (items->empty()) return Value::undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items->front() : items->back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string s = utf8_decode(v.as_string());
      std::reverse(s.begin(), s.end());
      return Value::string(utf8_encode(s));
    }
    auto items = to_list(v, cb);
    if (!items.ok()) return Status::Error("argument to reverse() must be a sequence");
    std::reverse(items->begin(), items->end());
    return Value::list(std::move(*items));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_dict()) return Status::Error("Can only get item pairs from a mapping.");
    if (v.as_dict().size() > cb.max_items()) return result_too_long(name, cb.max_items());
    List out;
    for (const auto& [k, x] : v.as_dict()) out.push_back(Value::list({k, x}, true));
    return Value::list(std::move(out));
  }
  if (name == "select" || name == "reject") return select(v, a, false, name == "select", cb);
  if (name == "selectattr" || name == "rejectattr") return select(v, a, true, name == "selectattr", cb);
  if (name == "map") return map_filter(v, a, cb);
  if (name == "indent") return indent(v, a, cb);
  if (name == "unique" || name == "sort") {
    const bool is_sort = name == "sort";
    if (is_sort) SY_RETURN_IF_ERROR(check_args(a, 3, {"reverse", "case_sensitive", "attribute"}, name));
    else SY_RETURN_IF_ERROR(check_args(a, 2, {"case_sensitive", "attribute"}, name));
    const Value* reverse = is_sort ? arg(a, 0, "reverse") : nullptr;
    const Value* cs = arg(a, is_sort ? 1 : 0, "case_sensitive");
    const Value* attribute = arg(a, is_sort ? 2 : 1, "attribute");
    auto items = to_list(v, cb);
    if (!items.ok()) return items.status();
    std::vector<Value> keys;
    for (const auto& item : *items) {
      auto key = sort_key(attribute && attribute->is_string() ? attribute_of(item, attribute->as_string()) : item,
                          cs && cs->truthy(), cb);
      if (!key.ok()) return key.status();
      keys.push_back(std::move(*key));
    }
    if (is_sort) {
      auto s = sorted(std::move(*items), keys, reverse && reverse->truthy());
      if (!s.ok()) return s.status();
      return Value::list(std::move(*s));
    }
    List out;
    std::vector<Value> seen;
    for (std::size_t i = 0; i < items->size(); ++i) {
      bool dup = false;
      for (const auto& k : seen) dup = dup || equals(k, keys[i]);
      if (dup) continue;
      seen.push_back(keys[i]);
      out.push_back((*items)[i]);
    }
    return Value::list(std::move(out));
  }
  if (name == "dictsort") {
    SY_RETURN_IF_ERROR(check_args(a, 3, {"case_sensitive", "by", "reverse"}, name));
    if (!v.is_dict()) return Status::Error("dictsort needs a mapping");
    const Value* cs = arg(a, 0, "case_sensitive");
    const Value* by = arg(a, 1, "by");
    const Value* reverse = arg(a, 2, "reverse");
    const bool by_value = by && by->is_string() && by->as_string() == "value";
    if (by && !(by->is_string() && (by->as_string() == "key" || by->as_string() == "value")))
      return Status::Error("You can only sort by either \"key\" or \"value\"");
    if (v.as_dict().size() > cb.max_items()) return result_too_long(name, cb.max_items());
    List pairs;
    std::vector<Value> keys;
    for (const auto& [k, x] : v.as_dict()) {
      pairs.push_back(Value::list({k, x}, true));
      auto key = sort_key(by_value ? x : k, cs && cs->truthy(), cb);
      if (!key.ok()) return key.status();
      keys.push_back(std::move(*key));
    }
    auto s = sorted(std::move(pairs), keys, reverse && reverse->truthy());
    if (!s.ok()) return s.status();
    return Value::list(std::move(*s));
  }
  if (name == "sum") {
    SY_RETURN_IF_ERROR(check_args(a, 2, {"attribute", "start"}, name));
    const Value* attribute = arg(a, 0, "attribute");
    const Value* start = arg(a, 1, "start");
    auto items = to_list(v, cb);
    if (!items.ok()) return items.status();
    Value total = start ? *start : Value::integer(0);
    for (const auto& item : *items) {
      const Value x = attribute && attribute->is_string() ? attribute_of(item, attribute->as_string()) : item;
      if (!x.is_number() || !total.is_number())
        return Status::Error("unsupported operand type(s) for +: '" + total.type_name() + "' and '" + x.type_name() + "'");
      if (total.is_float() || x.is_float()) {
        total = Value::floating(total.as_float() + x.as_float());
      } else {
        std::int64_t r;
        if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) return Status::Error("integer overflow");
        total = Value::integer(r);
      }
    }
    return total;
  }
  return Status::Error("unsupported filter '" + name + "'");
}

StatusOr<bool> apply_test(const std::string& name, const Value& v, const Args& a, Callbacks& cb) {
  const Value* other = a.positional.empty() ? nullptr : &a.positional[0];
  auto need = [&]() -> Status {
    return other ? Status::Ok() : Status::Error("test '" + name + "' needs an argument");
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  // jinja2's test: len() and __getitem__ work, which includes str, dict and Undefined.
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "callable") return v.is_macro() || v.is_function();
  if (name == "lower" || name == "upper") {
    auto text = py_str(v, cb.value_limit());
    if (!text.ok()) return text.status();
    const std::string& s = *text;
    const std::string mapped = name == "lower" ? py_upper(s) : py_lower(s);
    // islower(): has a cased character and no uppercase one (and the reverse for isupper).
    return mapped != s && (name == "lower" ? py_lower(s) == s : py_upper(s) == s);
  }
  if (name == "odd" || name == "even") {
    // value % 2 == 1 (odd) or == 0 (even), with Python's modulo.
    if (!v.is_number()) return Status::Error("test '" + name + "' needs a number, not " + v.type_name());
    double m = v.is_float() ? std::fmod(v.as_float(), 2.0) : static_cast<double>(v.as_int() % 2);
    if (m < 0) m += 2.0;
    return name == "odd" ? m == 1.0 : m == 0.0;
  }
  if (name == "divisibleby") {
    SY_RETURN_IF_ERROR(need());
    if (!v.is_number() || !other->is_number()) return Status::Error("divisibleby needs numbers");
    if (other->as_float() == 0) return Status::Error("integer division or modulo by zero");
    if (v.is_float() || other->is_float()) return std::fmod(v.as_float(), other->as_float()) == 0;
    return v.as_int() % other->as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") {
    SY_RETURN_IF_ERROR(need());
    return equals(v, *other);
  }
  if (name == "ne" || name == "!=") {
    SY_RETURN_IF_ERROR(need());
    return !equals(v, *other);
  }
  if (name == "lt" || name == "lessthan" || name == "<" || name == "le" || name == "<=" || name == "gt" ||
      name == "greaterthan" || name == ">" || name == "ge" || name == ">=") {
    SY_RETURN_IF_ERROR(need());
    if (v.is_undefined()) return Status::Error(v.undefined_hint());
    if (other->is_undefined()) return Status::Error(other->undefined_hint());
    auto o = py_order(v, *other);
    if (!o.ok()) return o.status();
    if (name == "lt" || name == "lessthan" || name == "<") return *o < 0;
    if (name == "le" || name == "<=") return *o <= 0;
    if (name == "gt" || name == "greaterthan" || name == ">") return *o > 0;
    return *o >= 0;
  }
  if (name == "in") {
    SY_RETURN_IF_ERROR(need());
    if (other->is_string()) {
      if (!v.is_string()) return Status::Error("'in <string>' requires string as left operand, not " + v.type_name());
      return other->as_string().find(v.as_string()) != std::string::npos;
    }
    if (other->is_list()) {
      for (const auto& x : other->as_list())
        if (equals(x, v)) return true;
      return false;
    }
    if (other->is_dict()) return other->find(v) != nullptr;
    if (other->is_undefined()) return false;
    return Status::Error("argument of type '" + other->type_name() + "' is not iterable");
  }
  if (name == "sameas") {
    SY_RETURN_IF_ERROR(need());
    // Python identity: None, True and False are singletons; other values only when they are one object.
    if (v.is_none() || other->is_none()) return v.is_none() && other->is_none();
    if (v.is_bool() || other->is_bool()) return v.is_bool() && other->is_bool() && v.as_bool() == other->as_bool();
    if (v.is_namespace() || v.is_macro()) return equals(v, *other);
    if (v.is_int() && other->is_int()) return v.as_int() == other->as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    return false;
  }
  return Status::Error("unsupported test '" + name + "'");
}

StatusOr<Value> call_global(const std::string& name, const Args& a, Callbacks& cb) {
  if (name == "raise_exception") {
    const Value* msg = arg(a, 0, "message");
    if (!msg) return Status::Error("raise_exception() called");
    auto text = py_str(*msg, cb.value_limit());
    return Status::Error(text.ok() ? *text : text.status().message());
  }
  if (name == "namespace" || name == "dict") {
    Dict items;
    auto put = [&](const Value& k, const Value& x) {
      for (auto& [ek, ev] : items)
        if (equals(ek, k)) {
          ev = x;
          return;
        }
      items.emplace_back(k, x);
    };
    if (a.positional.size() > 1) return Status::Error(name + "() takes at most 1 positional argument");
    if (!a.positional.empty()) {
      const Value& src = a.positional[0];
      if (src.is_dict()) {
        for (const auto& [k, x] : src.as_dict()) put(k, x);
      } else if (src.is_list()) {
        for (const auto& pair : src.as_list()) {
          if (!pair.is_list() || pair.as_list().size() != 2)
            return Status::Error(name + "(): sequence elements must be pairs");
          put(pair.as_list()[0], pair.as_list()[1]);
        }
      } else {
        return Status::Error(name + "(): '" + src.type_name() + "' object is not a mapping");
      }
    }
    for (const auto& [k, x] : a.keyword) put(Value::string(k), x);
    if (name == "dict") return Value::dict(std::move(items));
    for (const auto& [k, x] : items)
      if (k.is_string() && !k.as_string().empty() && k.as_string()[0] == '_')
        return Status::Error("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                             k.as_string() + "'. Please rename the attribute.");
    return Value::namespace_(std::move(items));
  }
  if (name == "range") {
    if (!a.keyword.empty()) return Status::Error("range() takes no keyword arguments");
    std::int64_t start = 0, stop = 0, step = 1;
    std::vector<std::int64_t> n;
    for (const auto& x : a.positional) {
      if (!x.is_int() && !x.is_bool()) return Status::Error("'" + x.type_name() + "' object cannot be interpreted as an integer");
      n.push_back(x.as_int());
    }
    if (n.size() == 1) stop = n[0];
    else if (n.size() == 2 || n.size() == 3) {
      start = n[0];
      stop = n[1];
      if (n.size() == 3) step = n[2];
    } else {
      return Status::Error("range expected 1 to 3 arguments, got " + std::to_string(n.size()));
    }
    if (step == 0) return Status::Error("range() arg 3 must not be zero");
    List out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= 100000)
        return Status::Error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      out.push_back(Value::integer(i));
    }
    return Value::list(std::move(out));
  }
  if (name == "strftime_now") {
    const Value* fmt = arg(a, 0, "format");
    if (!fmt || !fmt->is_string()) return Status::Error("strftime_now() needs a format string");
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[512];
    const std::size_t n = std::strftime(buf, sizeof(buf), fmt->as_string().c_str(), &tm);
    return Value::string(std::string(buf, n));
  }
  return Status::Error("'" + name + "' is undefined");
}

namespace {

// What call_method implements for strings, for the error on the rest of Python's str methods
// (jinja2 has them all, so "no attribute" would be the wrong answer).
constexpr std::string_view kStrMethods =
    "capitalize center count endswith find index isalnum isalpha isdecimal isdigit islower isnumeric isspace isupper "
    "join ljust lower lstrip removeprefix removesuffix replace rfind rjust rsplit rstrip split splitlines "
    "startswith strip title upper zfill";
const std::set<std::string, std::less<>> kPythonStrMethods = {
    "casefold",  "encode",      "expandtabs", "format",    "format_map", "isascii",    "isidentifier",
    "isprintable", "istitle",   "maketrans",  "partition", "rindex",     "rpartition", "swapcase",
    "translate"};

}  // namespace

StatusOr<Value> call_method(const Value& obj, const std::string& m, const Args& a, Callbacks& cb, bool& found) {
  found = true;
  const std::string what = obj.type_name() + "." + m + "()";
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    if (m == "startswith" || m == "endswith") {
      SY_RETURN_IF_ERROR(check_args(a, 1, {}, what));
      if (a.positional.empty()) return Status::Error(what + " takes at least 1 argument");
      const Value& p = a.positional[0];
      std::vector<std::string> options;
      if (p.is_string()) options.push_back(p.as_string());
      else if (p.is_list() && p.is_tuple()) {
        for (const auto& x : p.as_list()) {
          if (!x.is_string()) return Status::Error(what + ": tuple for " + m + " must only contain str");
          options.push_back(x.as_string());
        }
      } else {
        return Status::Error(what + " first arg must be str or a tuple of str, not " + p.type_name());
      }
      for (const auto& o : options) {
        if (m == "startswith" ? s.compare(0, o.size(), o) == 0 && s.size() >= o.size()
                              : s.size() >= o.size() && s.compare(s.size() - o.size(), o.size(), o) == 0)
          return Value::boolean(true);
      }
      return Value::boolean(false);
    }
    if (m == "strip" || m == "lstrip" || m == "rstrip") {
      SY_RETURN_IF_ERROR(check_args(a, 1, {}, what));
      auto chars = opt_string(arg(a, 0, "chars"), cb);
      if (!chars.ok()) return chars.status();
      return Value::string(py_strip(s, *chars, m != "rstrip", m != "lstrip"));
    }
    if (m == "split" || m == "rsplit") {
      SY_RETURN_IF_ERROR(check_args(a, 2, {"sep", "maxsplit"}, what));
      const Value* sep = arg(a, 0, "sep");
      if (sep && !sep->is_none() && !sep->is_string())
        return Status::Error("must be str or None, not " + sep->type_name());
      if (sep && sep->is_string() && sep->as_string().empty()) return Status::Error("empty separator");
      auto maxsplit = int_arg(arg(a, 1, "maxsplit"), -1, "maxsplit");
      if (!maxsplit.ok()) return maxsplit.status();
      const std::optional<std::string> sp = sep && sep->is_string() ? std::optional(sep->as_string()) : std::nullopt;
      // A string of separators splits into as many parts as it has bytes: split at most one
      // part past the limit on a list, which is then too long.
      const auto max_items = static_cast<std::int64_t>(cb.max_items());
      const std::int64_t cap = *maxsplit < 0 || *maxsplit > max_items ? max_items : *maxsplit;
      auto parts = m == "split" ? py_split(s, sp, cap) : py_rsplit(s, sp, cap);
      if (parts.size() > cb.max_items()) return result_too_long(what, cb.max_items());
      List out;
      for (auto& part : parts) out.push_back(Value::string(std::move(part)));
      return Value::list(std::move(out));
    }
    if (m == "upper") return Value::string(py_upper(s));
    if (m == "lower") return Value::string(py_lower(s));
    if (m == "title") return Value::string(py_title(s));
    if (m == "capitalize") return Value::string(py_capitalize(s));
    if (m == "replace") {
      SY_RETURN_IF_ERROR(check_args(a, 3, {"count"}, what));
      if (a.positional.size() < 2 || !a.positional[0].is_string() || !a.positional[1].is_string())
        return Status::Error(what + " needs two strings");
      auto count = int_arg(arg(a, 2, "count"), -1, "count");
      if (!count.ok()) return count.status();
      BoundedText out(what, cb.value_limit());
      py_replace(out, s, a.positional[0].as_string(), a.positional[1].as_string(), *count);
      return string_value(out);
    }
    if (m == "find" || m == "rfind" || m == "count" || m == "index") {
      SY_RETURN_IF_ERROR(check_args(a, 1, {}, what));
      if (a.positional.empty() || !a.positional[0].is_string()) return Status::Error(what + " needs a string");
      const std::string& sub = a.positional[0].as_string();
      if (m == "count") {
        if (sub.empty()) return Value::integer(static_cast<std::int64_t>(py_len(s)) + 1);
        std::int64_t n = 0;
        for (std::size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value::integer(n);
      }
      const std::size_t p = m == "rfind" ? s.rfind(sub) : s.find(sub);
      if (p == std::string::npos) {
        if (m == "index") return Status::Error("substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<std::int64_t>(py_len(std::string_view(s).substr(0, p))));
    }
    if (m == "join") {
      SY_RETURN_IF_ERROR(check_args(a, 1, {}, what));
      if (a.positional.empty()) return Status::Error(what + " takes exactly one argument");
      auto items = to_list(a.positional[0], cb);
      if (!items.ok()) return items.status();
      BoundedText out(what, cb.value_limit());
      for (std::size_t i = 0; i < items->size() && !out.full(); ++i) {
        if (!(*items)[i].is_string())
          return Status::Error("sequence item " + std::to_string(i) + ": expected str instance, " +
                               (*items)[i].type_name() + " found");
        if (i) out += s;
        out += (*items)[i].as_string();
      }
      return string_value(out);
    }
    if (m == "splitlines") {
      List out;
      bool too_long = false;
      for_each_line(s, [&](std::string line) {
        too_long = out.size() == cb.max_items();
        if (!too_long) out.push_back(Value::string(std::move(line)));
        return !too_long;
      });
      if (too_long) return result_too_long(what, cb.max_items());
      return Value::list(std::move(out));
    }
    if (m == "removeprefix" || m == "removesuffix") {
      if (a.positional.size() != 1 || !a.positional[0].is_string()) return Status::Error(what + " needs a string");
      const std::string& x = a.positional[0].as_string();
      if (m == "removeprefix" && s.compare(0, x.size(), x) == 0 && s.size() >= x.size()) return Value::string(s.substr(x.size()));
      if (m == "removesuffix" && !x.empty() && s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
        return Value::string(s.substr(0, s.size() - x.size()));
      return obj;
    }
    if (m == "zfill" || m == "center" || m == "ljust" || m == "rjust") {
      SY_RETURN_IF_ERROR(check_args(a, m == "zfill" ? 1 : 2, {}, what));
      if (a.positional.empty()) return Status::Error(what + " takes at least 1 argument");
      const Value& w = a.positional[0];
      if (!w.is_int() && !w.is_bool())
        return Status::Error("'" + w.type_name() + "' object cannot be interpreted as an integer");
      std::u32string fill = U" ";
      if (a.positional.size() > 1) {
        const Value& f = a.positional[1];
        if (!f.is_string()) return Status::Error(what + ": The fill character must be a unicode character, not " + f.type_name());
        fill = utf8_decode(f.as_string());
        if (fill.size() != 1) return Status::Error(what + ": The fill character must be exactly one character long");
      }
      const auto len = static_cast<std::int64_t>(py_len(s));
      const std::int64_t width = w.as_int();
      if (width <= len) return obj;
      const std::int64_t pad = width - len;
      std::string fill_utf8;
      utf8_append(fill_utf8, m == "zfill" ? U'0' : fill[0]);
      // Checked before the padding is built, by division: a width near 2^63 would wrap a product.
      if (s.size() > cb.value_limit() ||
          static_cast<std::uint64_t>(pad) > (cb.value_limit() - s.size()) / fill_utf8.size())
        return result_too_large(what, cb.value_limit());
      std::int64_t left = 0;
      if (m == "rjust" || m == "zfill") left = pad;
      else if (m == "center") left = pad / 2 + (pad & width & 1);  // CPython's rounding
      std::string out;
      out.reserve(s.size() + static_cast<std::size_t>(pad) * fill_utf8.size());
      std::size_t body = 0;
      if (m == "zfill" && !s.empty() && (s[0] == '+' || s[0] == '-')) {  // the sign stays in front
        out += s[0];
        body = 1;
      }
      for (std::int64_t i = 0; i < left; ++i) out += fill_utf8;
      out.append(s, body);
      for (std::int64_t i = left; i < pad; ++i) out += fill_utf8;
      return Value::string(std::move(out));
    }
    if (m == "isdigit" || m == "isdecimal" || m == "isnumeric" || m == "isalpha" || m == "isalnum" ||
        m == "isspace" || m == "islower" || m == "isupper") {
      const std::u32string cps = utf8_decode(s);
      if (m == "islower" || m == "isupper") {
        Args none;
        return Value::boolean(*apply_test(m == "islower" ? "lower" : "upper", obj, none, cb));
      }
      if (cps.empty()) return Value::boolean(false);
      bool (*const test)(char32_t) = m == "isdigit"     ? py_isdigit
                                     : m == "isdecimal" ? py_isdecimal
                                     : m == "isnumeric" ? py_isnumeric
                                     : m == "isalpha"   ? py_isalpha
                                     : m == "isalnum"   ? py_isalnum
                                                        : py_isspace;
      return Value::boolean(std::all_of(cps.begin(), cps.end(), test));
    }
  } else if (obj.is_dict()) {
    if (m == "items" || m == "keys" || m == "values") {
      if (!a.positional.empty() || !a.keyword.empty()) return Status::Error(what + " takes no arguments");
      if (obj.as_dict().size() > cb.max_items()) return result_too_long(what, cb.max_items());
      List out;
      for (const auto& [k, x] : obj.as_dict()) {
        if (m == "items") out.push_back(Value::list({k, x}, true));
        else out.push_back(m == "keys" ? k : x);
      }
      return Value::list(std::move(out));
    }
    if (m == "get") {
      if (a.positional.empty() || a.positional.size() > 2 || !a.keyword.empty())
        return Status::Error(what + " takes one or two positional arguments");
      if (const Value* x = obj.find(a.positional[0])) return *x;
      return a.positional.size() > 1 ? a.positional[1] : Value::none();
    }
    if (m == "update" || m == "pop" || m == "popitem" || m == "setdefault" || m == "clear")
      return Status::Error("access to attribute '" + m + "' of 'dict' object is unsafe.");
  } else if (obj.is_list()) {
    if (m == "count" || m == "index") {
      if (a.positional.size() != 1 || !a.keyword.empty()) return Status::Error(what + " takes exactly one argument");
      std::int64_t n = 0;
      for (std::size_t i = 0; i < obj.as_list().size(); ++i) {
        if (!equals(obj.as_list()[i], a.positional[0])) continue;
        if (m == "index") return Value::integer(static_cast<std::int64_t>(i));
        ++n;
      }
      if (m == "index") return Status::Error(repr_for_message(a.positional[0]) + " is not in list");
      return Value::integer(n);
    }
    if (m == "append" || m == "extend" || m == "insert" || m == "pop" || m == "remove" || m == "clear" ||
        m == "sort" || m == "reverse")
      return Status::Error("access to attribute '" + m + "' of '" + obj.type_name() + "' object is unsafe.");
  }
  if (obj.is_string() && kPythonStrMethods.count(m))
    return Status::Error("str." + m + "() is not supported (supported string methods: " + std::string(kStrMethods) + ")");
  found = false;
  return Value();
}

}  // namespace sy::text::jinja
