// Decoders of tokenizer.json (see decoder.h).
#include "engine/text/decoder.h"

#include "engine/text/json_fields.h"
#include "engine/text/normalizer.h"
#include "engine/text/utf8.h"

namespace sy::text {

int byte_token_value(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  int value = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = token[static_cast<std::size_t>(k)];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return -1;
    value = value * 16 + d;
  }
  return value;
}

Status Decoder::add(const nlohmann::json& node, const std::string& origin, std::vector<Step>& steps) {
  if (node.is_null()) return Status::Ok();
  auto type = type_of(node, origin, "decoder");
  if (!type.ok()) return type.status();
  const std::string& t = *type;
  const std::string what = "decoder " + t;
  Step s{};
  if (t == "Sequence") {
    if (!node.contains("decoders") || !node["decoders"].is_array())
      return field_error(origin, what, "\"decoders\" must be a list");
    for (const auto& child : node["decoders"]) SY_RETURN_IF_ERROR(add(child, origin, steps));
    return Status::Ok();
  } else if (t == "ByteLevel") {
    s.kind = Kind::ByteLevel;
  } else if (t == "Metaspace") {
    s.kind = Kind::Metaspace;
    auto r = string_field(node, "replacement", origin, what);
    if (!r.ok()) return r.status();
    s.content = *r;
    // Refused as the Metaspace pre-tokenizer refuses it: the decoder would otherwise strip a
    // prefix space under a scheme the encoder side never accepted.
    if (node.contains("prepend_scheme") && node["prepend_scheme"].is_string()) {
      const std::string scheme = node["prepend_scheme"].get<std::string>();
      if (scheme != "always" && scheme != "first" && scheme != "never")
        return field_error(origin, what, "unknown prepend_scheme '" + scheme + "'");
      s.prepend = scheme != "never";
    } else {
      auto aps = bool_field(node, "add_prefix_space", true, origin, what);
      if (!aps.ok()) return aps.status();
      s.prepend = *aps;
    }
  } else if (t == "Replace") {
    s.kind = Kind::Replace;
    bool is_regex = false;
    auto p = pattern_field(node, origin, what, is_regex);
    if (!p.ok()) return p.status();
    auto c = string_field(node, "content", origin, what);
    if (!c.ok()) return c.status();
    s.pattern = *p;
    s.content = *c;
    if (is_regex) {
      auto re = TextRegex::compile(s.pattern, origin + ": " + what);
      if (!re.ok()) return re.status();
      s.regex = std::make_shared<TextRegex>(std::move(*re));
    }
  } else if (t == "ByteFallback") {
    s.kind = Kind::ByteFallback;
  } else if (t == "Fuse") {
    s.kind = Kind::Fuse;
  } else if (t == "Strip") {
    s.kind = Kind::Strip;
    auto c = string_field(node, "content", origin, what);
    if (!c.ok()) return c.status();
    std::size_t i = 0;
    if (c->empty() || (next_code_point(*c, i), i != c->size()))
      return field_error(origin, what, "\"content\" must be one character");
    s.content = *c;
    for (const char* key : {"start", "stop"}) {
      if (!node.contains(key) || !node[key].is_number_unsigned())
        return field_error(origin, what, std::string("\"") + key + "\" must be a non-negative integer");
      (std::string(key) == "start" ? s.start : s.stop) = node[key].get<std::size_t>();
    }
  } else {
    return field_error(origin, "decoder type '" + t + "'",
                       "not supported (supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence)");
  }
  steps.push_back(std::move(s));
  return Status::Ok();
}

StatusOr<Decoder> Decoder::parse(const nlohmann::json& node, const std::string& origin) {
  Decoder d;
  d.present_ = !node.is_null();
  SY_RETURN_IF_ERROR(add(node, origin, d.steps_));
  for (const Step& s : d.steps_) d.groups_bytes_ = d.groups_bytes_ || s.kind == Kind::ByteFallback;
  return d;
}

namespace {

std::vector<std::string> byte_level(const std::vector<std::string>& tokens) {
  std::string bytes;
  for (const std::string& t : tokens) {
    const std::size_t mark = bytes.size();
    bool all = true;
    std::size_t i = 0;
    while (i < t.size()) {
      const int b = char_to_byte(next_code_point(t, i));
      if (b < 0) {
        all = false;
        break;
      }
      bytes += static_cast<char>(b);
    }
    if (!all) {
      bytes.resize(mark);
      bytes += t;
    }
  }
  return {utf8_lossy(bytes)};
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string run;
  std::size_t run_tokens = 0;
  auto flush = [&] {
    if (!run_tokens) return;
    if (is_valid_utf8(run)) {
      out.push_back(run);
    } else {
      for (std::size_t k = 0; k < run_tokens; ++k) out.emplace_back("\xEF\xBF\xBD");
    }
    run.clear();
    run_tokens = 0;
  };
  for (std::string& t : tokens) {
    const int b = byte_token_value(t);
    if (b >= 0) {
      run += static_cast<char>(b);
      ++run_tokens;
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  return out;
}

std::string strip(const std::string& token, const std::string& content, std::size_t start, std::size_t stop) {
  std::vector<std::size_t> starts;  // byte offset of every character
  std::vector<std::string_view> chars;
  std::size_t i = 0;
  while (i < token.size()) {
    const std::size_t b = i;
    next_code_point(token, i);
    chars.push_back(std::string_view(token).substr(b, i - b));
    starts.push_back(b);
  }
  std::size_t start_cut = 0;
  for (std::size_t k = 0; k < std::min(start, chars.size()); ++k) {
    if (chars[k] != content) break;
    start_cut = k + 1;
  }
  std::size_t stop_cut = chars.size();
  for (std::size_t k = 0; k < std::min(stop, chars.size()); ++k) {
    const std::size_t index = chars.size() - k - 1;
    if (chars[index] != content) break;
    stop_cut = index;
  }
  if (stop_cut <= start_cut) return "";
  const std::size_t b = start_cut < starts.size() ? starts[start_cut] : token.size();
  const std::size_t e = stop_cut < starts.size() ? starts[stop_cut] : token.size();
  return token.substr(b, e - b);
}

}  // namespace

std::string Decoder::apply_replace(const Step& s, const std::string& token) {
  std::vector<Span> m;
  // Neither caller has an error to give: a match PCRE2 gives up on (its match limit, on one
  // token) leaves the rest of that token unreplaced.
  if (s.regex) static_cast<void>(s.regex->find_all(token, m));
  else find_literal(token, s.pattern, m);
  return replace_all(token, m, s.content);
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (!present_) {
    std::string out;
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      if (k) out += ' ';
      out += tokens[k];
    }
    return out;
  }
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Kind::ByteLevel:
        tokens = byte_level(tokens);
        break;
      case Kind::ByteFallback:
        tokens = byte_fallback(std::move(tokens));
        break;
      case Kind::Fuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case Kind::Replace:
        for (std::string& t : tokens) t = apply_replace(s, t);
        break;
      case Kind::Strip:
        for (std::string& t : tokens) t = strip(t, s.content, s.start, s.stop);
        break;
      case Kind::Metaspace:
        for (std::size_t k = 0; k < tokens.size(); ++k) {
          std::string out;
          const std::string& t = tokens[k];
          std::size_t pos = 0;
          while (pos < t.size()) {
            if (t.compare(pos, s.content.size(), s.content) == 0) {
              if (!(k == 0 && s.prepend)) out += ' ';
              pos += s.content.size();
            } else {
              out += t[pos++];
            }
          }
          tokens[k] = std::move(out);
        }
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::string Decoder::token_bytes(const std::string& token) const {
  if (!present_) return token;
  std::string t = token;
  bool fused = false;
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Kind::ByteLevel: {
        std::string bytes;
        std::size_t i = 0;
        bool all = true;
        while (i < t.size() && all) {
          const int b = char_to_byte(next_code_point(t, i));
          if (b < 0) all = false;
          else bytes += static_cast<char>(b);
        }
        if (all) t = std::move(bytes);
        break;
      }
      case Kind::ByteFallback:
        if (const int b = byte_token_value(t); b >= 0) t = std::string(1, static_cast<char>(b));
        break;
      case Kind::Fuse:
        fused = true;
        break;
      case Kind::Replace:
        t = apply_replace(s, t);
        break;
      case Kind::Strip:
        if (!fused) t = strip(t, s.content, s.start, s.stop);
        break;
      case Kind::Metaspace: {
        std::string out;
        std::size_t pos = 0;
        while (pos < t.size()) {
          if (t.compare(pos, s.content.size(), s.content) == 0) {
            out += ' ';
            pos += s.content.size();
          } else {
            out += t[pos++];
          }
        }
        t = std::move(out);
        break;
      }
    }
  }
  return t;
}

}  // namespace sy::text
