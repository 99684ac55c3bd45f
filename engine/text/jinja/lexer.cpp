#include "engine/text/jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include "engine/text/jinja/python_string.h"

namespace sy::text::jinja {
namespace {

class Lexer {
 public:
  Lexer(std::string source, std::string_view origin) : src_(std::move(source)), origin_(origin) {
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  StatusOr<std::vector<Token>> run() {
    std::size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      const std::size_t open = find_open(pos);
      std::string data = src_.substr(pos, open - pos);
      if (open == src_.size()) {
        emit_text(std::move(data), pos);
        break;
      }
      const char type = src_[open + 1];  // '{', '%' or '#'
      const char sign = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (sign == '-') {
        data = rstrip_ws(data);
      } else if (sign != '+' && type != '{') {
        // lstrip_blocks: only spaces and tabs between the line start and the tag.
        const std::size_t nl = data.rfind('\n');
        const std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < data.size() && all_ws(std::string_view(data).substr(l_pos)))
          data.resize(l_pos);
      }
      emit_text(std::move(data), pos);
      std::size_t p = open + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (type == '#') {
        auto end = comment_end(p);
        if (!end.ok()) return end.status();
        pos = *end;
      } else if (type == '%' && is_raw(p)) {
        auto end = raw_block(open, p);
        if (!end.ok()) return end.status();
        pos = *end;
      } else {
        auto end = tag(open, p, type == '{');
        if (!end.ok()) return end.status();
        pos = *end;
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    tokens_.push_back(Token{Token::Kind::kEof, "", 0, 0});
    locate(tokens_.back(), src_.size());
    return std::move(tokens_);
  }

 private:
  std::size_t find_open(std::size_t pos) const {
    for (std::size_t i = pos; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  static bool all_ws(std::string_view s) {
    for (char32_t c : utf8_decode(s))
      if (!py_isspace(c)) return false;
    return true;
  }

  static std::string rstrip_ws(const std::string& s) { return py_strip(s, std::nullopt, false, true); }

  // Index after the whitespace following `pos` (the "\s*" after a "-" closer).
  std::size_t skip_ws(std::size_t pos) const {
    while (pos < src_.size()) {
      const auto c = static_cast<unsigned char>(src_[pos]);
      if (c < 0x80) {
        if (!py_isspace(c)) break;
        ++pos;
        continue;
      }
      std::size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
      const auto cps = utf8_decode(std::string_view(src_).substr(pos, len));
      if (cps.size() != 1 || !py_isspace(cps[0])) break;
      pos += len;
    }
    return pos;
  }

  void locate(Token& t, std::size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const auto line = static_cast<std::size_t>(it - line_starts_.begin());
    t.line = static_cast<int>(line);
    t.col = static_cast<int>(offset - line_starts_[line - 1] + 1);
  }

  Status error(std::size_t offset, const std::string& message) const {
    Token t{Token::Kind::kEof, "", 0, 0};
    locate(t, offset);
    return Status::Error(std::string(origin_) + ":" + std::to_string(t.line) + ":" + std::to_string(t.col) + ": " +
                         message);
  }

  void emit_text(std::string data, std::size_t offset) {
    if (data.empty()) return;
    Token t{Token::Kind::kText, std::move(data), 0, 0};
    locate(t, offset);
    tokens_.push_back(std::move(t));
  }

  void emit(Token::Kind kind, std::string text, std::size_t offset) {
    Token t{kind, std::move(text), 0, 0};
    locate(t, offset);
    tokens_.push_back(std::move(t));
  }

  StatusOr<std::size_t> comment_end(std::size_t p) const {
    const std::size_t end = src_.find("#}", p);
    if (end == std::string::npos) return error(p - 2, "unclosed comment: '{#' without '#}'");
    if (end > p && src_[end - 1] == '-') return skip_ws(end + 2);
    if (end > p && src_[end - 1] == '+') return end + 2;
    return (end + 2 < src_.size() && src_[end + 2] == '\n') ? end + 3 : end + 2;
  }

  bool is_raw(std::size_t p) const {
    std::size_t q = p;
    while (q < src_.size() && py_isspace(static_cast<unsigned char>(src_[q]))) ++q;
    if (src_.compare(q, 3, "raw") != 0) return false;
    q += 3;
    return q < src_.size() && (py_isspace(static_cast<unsigned char>(src_[q])) || src_[q] == '-' || src_[q] == '%');
  }

  // {% raw %} ... {% endraw %}: the text between is output as it is.
  StatusOr<std::size_t> raw_block(std::size_t open, std::size_t p) {
    std::size_t q = src_.find("raw", p) + 3;
    while (q < src_.size() && py_isspace(static_cast<unsigned char>(src_[q]))) ++q;
    std::size_t body;
    if (src_.compare(q, 3, "-%}") == 0) body = skip_ws(q + 3);
    else if (src_.compare(q, 2, "%}") == 0) body = q + 2;
    else return error(open, "expected '%}' after 'raw'");
    for (std::size_t s = src_.find("{%", body); s != std::string::npos; s = src_.find("{%", s + 2)) {
      std::size_t r = s + 2;
      const char sign = r < src_.size() ? src_[r] : '\0';
      if (sign == '-' || sign == '+') ++r;
      while (r < src_.size() && py_isspace(static_cast<unsigned char>(src_[r]))) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < src_.size() && py_isspace(static_cast<unsigned char>(src_[r]))) ++r;
      std::size_t after;
      if (src_.compare(r, 3, "-%}") == 0) after = skip_ws(r + 3);
      else if (src_.compare(r, 3, "+%}") == 0) after = r + 3;
      else if (src_.compare(r, 2, "%}") == 0) after = (r + 2 < src_.size() && src_[r + 2] == '\n') ? r + 3 : r + 2;
      else continue;
      std::string text = src_.substr(body, s - body);
      if (sign == '-') text = rstrip_ws(text);
      emit_text(std::move(text), body);
      return after;
    }
    return error(open, "unclosed '{% raw %}': no '{% endraw %}'");
  }

  // The inside of {{ ... }} or {% ... %}; returns the index after the closer.
  StatusOr<std::size_t> tag(std::size_t open, std::size_t p, bool variable) {
    emit(variable ? Token::Kind::kVarBegin : Token::Kind::kBlockBegin, variable ? "{{" : "{%", open);
    const char close = variable ? '}' : '%';
    int depth = 0;
    while (true) {
      while (p < src_.size() && py_isspace(static_cast<unsigned char>(src_[p]))) ++p;
      if (p >= src_.size())
        return error(open, std::string("unclosed tag: '") + (variable ? "{{" : "{%") + "' without '" +
                               (variable ? "}}" : "%}") + "'");
      if (depth == 0) {
        if ((src_[p] == '-' || src_[p] == '+') && src_.compare(p + 1, 2, std::string(1, close) + "}") == 0) {
          emit(variable ? Token::Kind::kVarEnd : Token::Kind::kBlockEnd, "", p);
          if (src_[p] == '-') return skip_ws(p + 3);
          return p + 3;
        }
        if (src_[p] == close && p + 1 < src_.size() && src_[p + 1] == '}') {
          emit(variable ? Token::Kind::kVarEnd : Token::Kind::kBlockEnd, "", p);
          if (!variable && p + 2 < src_.size() && src_[p + 2] == '\n') return p + 3;  // trim_blocks
          return p + 2;
        }
      }
      const char c = src_[p];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t q = p;
        while (q < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
        emit(Token::Kind::kName, src_.substr(p, q - p), p);
        p = q;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        auto n = number(p);
        if (!n.ok()) return n.status();
        p = *n;
      } else if (c == '\'' || c == '"') {
        auto s = string_literal(p);
        if (!s.ok()) return s.status();
        p = *s;
      } else {
        static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
        std::string op;
        for (const char* t : kTwo)
          if (src_.compare(p, 2, t) == 0) op = t;
        if (op.empty()) {
          if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos)
            return error(p, std::string("unexpected character '") + c + "' in tag");
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") ++depth;
        if (op == ")" || op == "]" || op == "}") {
          if (depth == 0) return error(p, "unexpected '" + op + "'");
          --depth;
        }
        emit(Token::Kind::kOp, op, p);
        p += op.size();
      }
    }
  }

  StatusOr<std::size_t> number(std::size_t p) {
    const std::size_t start = p;
    auto digits = [&](std::size_t q) {
      while (q < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[q])) ||
                                 (src_[q] == '_' && q + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q + 1])))))
        ++q;
      return q;
    };
    p = digits(p);
    bool is_float = false;
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    if (!after_dot && p + 1 < src_.size() && src_[p] == '.' && std::isdigit(static_cast<unsigned char>(src_[p + 1]))) {
      p = digits(p + 1);
      is_float = true;
    }
    if (!after_dot && p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      std::size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        p = digits(q);
        is_float = true;
      }
    }
    std::string text = src_.substr(start, p - start);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    emit(is_float ? Token::Kind::kFloat : Token::Kind::kInt, std::move(text), start);
    return p;
  }

  // Python's unicode-escape decoding of a quoted literal, as jinja2 applies it.
  StatusOr<std::size_t> string_literal(std::size_t p) {
    const char quote = src_[p];
    std::string out;
    std::size_t q = p + 1;
    while (true) {
      if (q >= src_.size()) return error(p, "unterminated string literal");
      const char c = src_[q];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++q;
        continue;
      }
      if (q + 1 >= src_.size()) return error(p, "unterminated string literal");
      const char e = src_[q + 1];
      q += 2;
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (q + n > src_.size()) return error(q - 2, "truncated \\" + std::string(1, e) + " escape");
          char32_t cp = 0;
          for (std::size_t k = 0; k < n; ++k) {
            const char h = src_[q + k];
            if (!std::isxdigit(static_cast<unsigned char>(h))) return error(q - 2, "truncated \\" + std::string(1, e) + " escape");
            cp = cp * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          if (cp > 0x10FFFF) return error(q - 2, "illegal Unicode character in escape");
          utf8_append(out, cp);
          q += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && q < src_.size() && src_[q] >= '0' && src_[q] <= '7'; ++k, ++q)
              cp = cp * 8 + static_cast<char32_t>(src_[q] - '0');
            utf8_append(out, cp);
          } else if (e == 'N') {
            return error(q - 2, "\\N{...} escapes are not supported");
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    emit(Token::Kind::kString, std::move(out), p);
    return q + 1;
  }

  std::string src_;
  std::string_view origin_;
  std::vector<std::size_t> line_starts_;
  std::vector<Token> tokens_;
};

// jinja2 turns \r\n and \r into \n and drops one trailing newline (keep_trailing_newline=False).
std::string normalize(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

StatusOr<std::vector<Token>> tokenize(std::string_view source, std::string_view origin) {
  return Lexer(normalize(source), origin).run();
}

}  // namespace sy::text::jinja
