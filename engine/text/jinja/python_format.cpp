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

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
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
      utf8_append(out, c);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string py_repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kString: return repr_string(v.as_string());
    case Value::Kind::kList: {
      std::string out = v.is_tuple() ? "(" : "[";
      const auto& items = v.as_list();
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += py_repr(items[i]);
      }
      if (v.is_tuple() && items.size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.as_dict()) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(k) + ": " + py_repr(x);
      }
      return out + "}";
    }
    case Value::Kind::kNamespace: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, x] : v.namespace_attrs()) {
        if (!first) out += ", ";
        first = false;
        out += py_repr(k) + ": " + py_repr(x);
      }
      return out + "}>";
    }
    default: return py_str(v);
  }
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return py_float_repr(v.as_float());
    case Value::Kind::kString: return v.as_string();
    case Value::Kind::kMacro: return "<Macro>";
    case Value::Kind::kFunction: return "<function " + v.function_name() + ">";
    default: return py_repr(v);
  }
}

namespace {

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  if (ensure_ascii) {
    for (char32_t c : utf8_decode(s)) {
      if (c < 0x80) {
        std::string one(1, static_cast<char>(c));
        std::string quoted;
        json_string(quoted, one, false);
        out += quoted.substr(1, quoted.size() - 2);
        continue;
      }
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
    out += '"';
    return;
  }
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(d);
}

Status dump(std::string& out, const Value& v, const JsonOptions& o, const std::string& item_sep,
            const std::string& key_sep, int level) {
  if (level > 500) return Status::Error("tojson: value nested too deeply");
  auto newline = [&](int lvl) {
    if (!o.indent) return;
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += *o.indent;
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
      for (std::size_t i = 0; i < items.size(); ++i) {
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
      for (std::size_t i = 0; i < items.size(); ++i) {
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

StatusOr<std::string> py_json_dumps(const Value& v, const JsonOptions& options) {
  std::string item_sep = options.indent ? "," : ", ";
  std::string key_sep = ": ";
  if (options.separators) {
    item_sep = options.separators->first;
    key_sep = options.separators->second;
  }
  std::string out;
  SY_RETURN_IF_ERROR(dump(out, v, options, item_sep, key_sep, 0));
  return out;
}

}  // namespace sy::text::jinja
