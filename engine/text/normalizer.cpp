// Normalizers of tokenizer.json (see normalizer.h).
#include "engine/text/normalizer.h"

#include <cstdlib>

#include <utf8proc.h>

#include "engine/text/json_fields.h"
#include "engine/text/utf8.h"

namespace sy::text {

namespace {

std::string unicode_form(const std::string& text, int options) {
  if (text.empty()) return text;
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  if (n < 0) return text;  // only for invalid UTF-8, which encode() has already replaced
  std::string result(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
  std::free(out);
  return result;
}

// Rust's char::to_lowercase, one character at a time (no final-sigma context, as HF does).
std::string lowercase(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const char32_t c = next_code_point(text, i);
    if (c < 0x80) {
      out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    } else if (c == 0x130) {  // the one unconditional multi-character lower case mapping
      out += "i\xCC\x87";
    } else {
      append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

std::string strip(const std::string& text, bool left, bool right) {
  std::size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end) {
      std::size_t i = begin;
      if (!is_whitespace(next_code_point(text, i))) break;
      begin = i;
    }
  }
  if (right) {
    while (end > begin) {
      std::size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      std::size_t i = start;
      if (!is_whitespace(next_code_point(text, i))) break;
      end = start;
    }
  }
  return text.substr(begin, end - begin);
}

}  // namespace

std::string replace_all(const std::string& text, const std::vector<Span>& matches, const std::string& content) {
  if (matches.empty()) return text;
  std::string out;
  out.reserve(text.size());
  std::size_t prev = 0;
  for (const auto& [b, e] : matches) {
    out.append(text, prev, b - prev);
    out += content;
    prev = e;
  }
  out.append(text, prev, std::string::npos);
  return out;
}

Status Normalizer::add(const nlohmann::json& node, const std::string& origin, std::vector<Step>& steps) {
  if (node.is_null()) return Status::Ok();
  auto type = type_of(node, origin, "normalizer");
  if (!type.ok()) return type.status();
  const std::string& t = *type;
  const std::string what = "normalizer " + t;
  Step s{};
  if (t == "Sequence") {
    if (!node.contains("normalizers") || !node["normalizers"].is_array())
      return field_error(origin, what, "\"normalizers\" must be a list");
    for (const auto& child : node["normalizers"]) SY_RETURN_IF_ERROR(add(child, origin, steps));
    return Status::Ok();
  } else if (t == "NFC") {
    s.kind = Kind::NFC;
  } else if (t == "NFD") {
    s.kind = Kind::NFD;
  } else if (t == "NFKC") {
    s.kind = Kind::NFKC;
  } else if (t == "NFKD") {
    s.kind = Kind::NFKD;
  } else if (t == "Lowercase") {
    s.kind = Kind::Lowercase;
  } else if (t == "Strip") {
    s.kind = Kind::Strip;
    auto l = bool_field(node, "strip_left", true, origin, what);
    auto r = bool_field(node, "strip_right", true, origin, what);
    if (!l.ok()) return l.status();
    if (!r.ok()) return r.status();
    s.left = *l;
    s.right = *r;
  } else if (t == "Prepend") {
    s.kind = Kind::Prepend;
    auto p = string_field(node, "prepend", origin, what);
    if (!p.ok()) return p.status();
    s.content = *p;
  } else if (t == "Replace") {
    bool is_regex = false;
    auto p = pattern_field(node, origin, what, is_regex);
    if (!p.ok()) return p.status();
    auto c = string_field(node, "content", origin, what);
    if (!c.ok()) return c.status();
    s.pattern = *p;
    s.content = *c;
    s.kind = is_regex ? Kind::ReplaceRegex : Kind::ReplaceString;
    if (is_regex) {
      auto re = TextRegex::compile(s.pattern, origin + ": " + what);
      if (!re.ok()) return re.status();
      s.regex = std::make_shared<TextRegex>(std::move(*re));
    }
  } else {
    return field_error(origin, "normalizer type '" + t + "'",
                       "not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, Prepend, Replace, Sequence)");
  }
  steps.push_back(std::move(s));
  return Status::Ok();
}

StatusOr<Normalizer> Normalizer::parse(const nlohmann::json& node, const std::string& origin) {
  Normalizer n;
  SY_RETURN_IF_ERROR(add(node, origin, n.steps_));
  return n;
}

StatusOr<std::string> Normalizer::apply(std::string text) const {
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Kind::NFC: text = unicode_form(text, UTF8PROC_COMPOSE); break;
      case Kind::NFD: text = unicode_form(text, UTF8PROC_DECOMPOSE); break;
      case Kind::NFKC: text = unicode_form(text, UTF8PROC_COMPOSE | UTF8PROC_COMPAT); break;
      case Kind::NFKD: text = unicode_form(text, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT); break;
      case Kind::Lowercase: text = lowercase(text); break;
      case Kind::Strip: text = strip(text, s.left, s.right); break;
      case Kind::Prepend:
        if (!text.empty()) text = s.content + text;
        break;
      case Kind::ReplaceString: {
        std::vector<Span> m;
        find_literal(text, s.pattern, m);
        text = replace_all(text, m, s.content);
        break;
      }
      case Kind::ReplaceRegex: {
        std::vector<Span> m;
        SY_RETURN_IF_ERROR(s.regex->find_all(text, m));
        text = replace_all(text, m, s.content);
        break;
      }
    }
  }
  return text;
}

}  // namespace sy::text
