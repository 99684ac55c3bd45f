#include "engine/text/jinja/python_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engine/text/jinja/python_string.h"

namespace sy::text::jinja {

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout: scientific when the exponent is < -4 or >= 16.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const std::size_t epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::atoi(sci.c_str() + epos + 1);
  const int decpt = exp + 1;  // value = 0.digits * 10^decpt
  if (decpt > 16 || decpt < -3) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + e;
  }
  std::string out = sign;
  if (decpt <= 0) {
    out += "0." + std::string(static_cast<std::size_t>(-decpt), '0') + digits;
  } else if (static_cast<std::size_t>(decpt) >= digits.size()) {
    out += digits + std::string(static_cast<std::size_t>(decpt) - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<std::size_t>(decpt)) + "." + digits.substr(static_cast<std::size_t>(decpt));
  }
  return out;
}

namespace {

// str.isprintable() approximated for the characters chat text carries: controls, the Latin-1
// and general-punctuation format/space characters and surrogates are not printable.
bool printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c >= 0x2000 && c <= 0x200F) return false;
  if (c >= 0x2028 && c <= 0x202F) return false;
  if (c >= 0x205F && c <= 0x206F) return false;
  if (c == 0x1680 || c == 0x3000 || c == 0xFEFF || (c >= 0xD800 && c <= 0xDFFF) || (c >= 0xE000 && c <= 0xF8FF))
    return false;
  if (c == 0xFFFE || c == 0xFFFF || c > 0x10FFFF) return false;
  return true;
}

void append_repr_string(BoundedText& out, const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out += quote;
  std::string one;
  for (std::size_t i = 0; i < s.size() && !out.full();) {
    // A run of printable ASCII needing no escape goes in at once: long text is mostly that.
    const std::size_t run = i;
    while (i < s.size() && s[i] >= 0x20 && s[i] < 0x7F && s[i] != quote && s[i] != '\\') ++i;
    out += std::string_view(s).substr(run, i - run);
    if (i == s.size()) break;
    const char32_t c = utf8_next(s, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      char buf[16];
      if (c < 0x100) std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000) std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      else std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    } else {
      one.clear();
      utf8_append(one, c);
      out += one;
    }
  }
  out += quote;
}

// The items of a dict or namespace, as repr prints them.
void append_dict_items(BoundedText& out, const Dict& items) {
  bool first = true;
  for (const auto& [k, x] : items) {
    if (out.full()) return;
    if (!first) out += ", ";
    first = false;
    append_repr(out, k);
    out += ": ";
    append_repr(out, x);
  }
}

}  // namespace

void append_repr(BoundedText& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: out += "Undefined"; return;
    case Value::Kind::kString: append_repr_string(out, v.as_string()); return;
    case Value::Kind::kList: {
      out += v.is_tuple() ? "(" : "[";
      const auto& items = v.as_list();
      for (std::size_t i = 0; i < items.size() && !out.full(); ++i) {
        if (i) out += ", ";
        append_repr(out, items[i]);
      }
      if (v.is_tuple() && items.size() == 1) out += ",";
      out += v.is_tuple() ? ")" : "]";
      return;
    }
    case Value::Kind::kDict:
      out += "{";
      append_dict_items(out, v.as_dict());
      out += "}";
      return;
    case Value::Kind::kNamespace:
      out += "<Namespace {";
      append_dict_items(out, v.namespace_attrs());
      out += "}>";
      return;
    default: append_str(out, v);
  }
}

void append_str(BoundedText& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return;
    case Value::Kind::kNone: out += "None"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: out += py_float_repr(v.as_float()); return;
    case Value::Kind::kString: out += v.as_string(); return;
    case Value::Kind::kMacro: out += "<Macro>"; return;
    case Value::Kind::kFunction: out += "<function " + v.function_name() + ">"; return;
    default: append_repr(out, v);
  }
}

StatusOr<std::string> py_str(const Value& v, std::size_t limit) {
  BoundedText out("printing a " + v.type_name(), limit);
  append_str(out, v);
  return out.take();
}

std::string repr_for_message(const Value& v) {
  constexpr std::size_t kMessageRepr = 400;
  BoundedText out("", kMessageRepr);
  append_repr(out, v);
  if (!out.full()) return out.text();
  // Cut before the character the limit fell in (or after it, if whole: one character less).
  std::string text = out.text();
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
  return text + "...";
}

namespace {

// An ASCII character as json.dumps writes it in a string.
void json_ascii(BoundedText& out, char c) {
  switch (c) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    case '\b': out += "\\b"; return;
    case '\f': out += "\\f"; return;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
        out += buf;
      } else {
        out += c;
      }
  }
}

// A byte json.dumps writes as it is: not '"', '\\' or a control character, and with ensure_ascii
// nothing outside ' ' to '~' (DEL is escaped too).
bool json_plain(unsigned char b, bool ensure_ascii) {
  return b >= 0x20 && b != '"' && b != '\\' && !(ensure_ascii && b >= 0x7F);
}

void json_string(BoundedText& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (std::size_t i = 0; i < s.size() && !out.full();) {
    // A run needing no escape goes in at once: long text is mostly that.
    const std::size_t run = i;
    while (i < s.size() && json_plain(static_cast<unsigned char>(s[i]), ensure_ascii)) ++i;
    out += std::string_view(s).substr(run, i - run);
    if (i == s.size()) break;
    if (!ensure_ascii || static_cast<unsigned char>(s[i]) < 0x7F) {
      json_ascii(out, s[i++]);
    } else {
      const char32_t c = utf8_next(s, i);
      char buf[16];
      if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      } else {
        const char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      }
      out += buf;
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(d);
}

Status dump(BoundedText& out, const Value& v, const JsonOptions& o, const std::string& item_sep,
            const std::string& key_sep, int level) {
  if (level > 500) return Status::Error("tojson: value nested too deeply");
  auto newline = [&](int lvl) {
    if (!o.indent) return;
    out += '\n';
    for (int i = 0; i < lvl && !out.full(); ++i) out += *o.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return Status::Ok();
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return Status::Ok();
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return Status::Ok();
    case Value::Kind::kFloat: out += json_float(v.as_float()); return Status::Ok();
    case Value::Kind::kString: json_string(out, v.as_string(), o.ensure_ascii); return Status::Ok();
    case Value::Kind::kList: {
      const auto& items = v.as_list();
      if (items.empty()) { out += "[]"; return Status::Ok(); }
      out += '[';
      for (std::size_t i = 0; i < items.size() && !out.full(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        SY_RETURN_IF_ERROR(dump(out, items[i], o, item_sep, key_sep, level + 1));
      }
      newline(level);
      out += ']';
      return Status::Ok();
    }
    case Value::Kind::kDict: {
      const auto& src = v.as_dict();
      if (src.empty()) { out += "{}"; return Status::Ok(); }
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, x] : src) {
        std::string key;
        switch (k.kind()) {
          case Value::Kind::kString: key = k.as_string(); break;
          case Value::Kind::kInt: key = std::to_string(k.as_int()); break;
          case Value::Kind::kFloat: key = json_float(k.as_float()); break;
          case Value::Kind::kBool: key = k.as_bool() ? "true" : "false"; break;
          case Value::Kind::kNone: key = "null"; break;
          default:
            return Status::Error("keys must be str, int, float, bool or None, not " + k.type_name());
        }
        items.emplace_back(std::move(key), &x);
      }
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (std::size_t i = 0; i < items.size() && !out.full(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        json_string(out, items[i].first, o.ensure_ascii);
        out += key_sep;
        SY_RETURN_IF_ERROR(dump(out, *items[i].second, o, item_sep, key_sep, level + 1));
      }
      newline(level);
      out += '}';
      return Status::Ok();
    }
    default:
      return Status::Error("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

StatusOr<std::string> py_json_dumps(const Value& v, const JsonOptions& options, std::size_t limit) {
  std::string item_sep = options.indent ? "," : ", ";
  std::string key_sep = ": ";
  if (options.separators) {
    item_sep = options.separators->first;
    key_sep = options.separators->second;
  }
  BoundedText out("tojson", limit);
  SY_RETURN_IF_ERROR(dump(out, v, options, item_sep, key_sep, 0));
  return out.take();
}

}  // namespace sy::text::jinja
