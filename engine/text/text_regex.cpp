// PCRE2 behind TextRegex (see text_regex.h).
#include "engine/text/text_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>

#include "engine/text/utf8.h"

namespace sy::text {

struct TextRegex::Code {
  pcre2_code* code = nullptr;
  std::string what, pattern;  // for errors
  ~Code() { pcre2_code_free(code); }
};

namespace {

// Rust's and Oniguruma's Unicode \s (White_Space) and \w (letters, marks, decimal digits,
// connector punctuation, joiners): PCRE2 10.42's \s also takes U+180E and its \w lacks the
// marks, so both are spelled out.
constexpr std::string_view kSpace =
    R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
constexpr std::string_view kWord = R"(\p{L}\p{M}\p{Nd}\p{Nl}\p{Pc}\x{200C}\x{200D})";

std::string rust_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      const std::string_view body = (e == 's' || e == 'S') ? kSpace : kWord;
      if (e == 's' || e == 'w') {
        if (in_class) out.append(body);
        else out.append("[").append(body).append("]");
        ++i;
        continue;
      }
      if ((e == 'S' || e == 'W') && !in_class) {
        out.append("[^").append(body).append("]");
        ++i;
        continue;
      }
      out += c;
      out += e;
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ] right after [ or [^ is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {  // [:alpha:]
      const std::size_t end = pattern.find(":]", i + 2);
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i, end + 2 - i));
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

StatusOr<TextRegex> TextRegex::compile(std::string_view source, const std::string& what) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const std::string pattern = rust_classes(source);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    return Status::Error(what + ": regex '" + std::string(source) + "' does not compile: " +
                         reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // interpreted when the JIT is unavailable
  auto owned = std::make_shared<Code>();
  owned->code = code;
  owned->what = what;
  owned->pattern = std::string(source);
  TextRegex r;
  r.code_ = std::move(owned);
  return r;
}

namespace {

struct MatchData {
  pcre2_match_data* data;
  explicit MatchData(const pcre2_code* code) : data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
};

// The JIT stack and the match context that hands it to pcre2_match, made for one find_all
// (a stack serves one match at a time, and a TextRegex is shared between threads).
struct BigJitStack {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  BigJitStack() {
    stack = pcre2_jit_stack_create(32 * 1024, TextRegex::kMaxJitStack, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (stack && context) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~BigJitStack() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
  BigJitStack(const BigJitStack&) = delete;
  BigJitStack& operator=(const BigJitStack&) = delete;
};

}  // namespace

Status TextRegex::find_all(std::string_view text, std::vector<Span>& out) const {
  MatchData md(code_->code);
  std::unique_ptr<BigJitStack> big;  // most texts never need it
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t pos = 0;
  std::size_t last_end = std::string_view::npos;
  while (pos <= text.size()) {
    int rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md.data,
                         big ? big->context : nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !big) {
      big = std::make_unique<BigJitStack>();
      if (big->stack && big->context)
        rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md.data, big->context);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      // Treating this as no match would split the rest of the text differently from HF, and
      // silently: the caller gets the error instead.
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      return Status::Error(code_->what + ": regex '" + code_->pattern + "' failed at byte " + std::to_string(pos) +
                           " of a piece of " + std::to_string(text.size()) + " bytes: " +
                           reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const std::size_t s = ov[0], e = ov[1];
    if (s == e && last_end == e) {
      if (e >= text.size()) break;
      pos = e + utf8_length(static_cast<unsigned char>(text[e]));
      continue;
    }
    out.emplace_back(s, e);
    last_end = e;
    pos = e;
  }
  return Status::Ok();
}

bool TextRegex::search(std::string_view text) const {
  MatchData md(code_->code);
  return pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, PCRE2_NO_UTF_CHECK,
                     md.data, nullptr) >= 0;
}

void find_literal(std::string_view text, std::string_view needle, std::vector<Span>& out) {
  if (needle.empty()) return;
  std::size_t pos = 0;
  while ((pos = text.find(needle, pos)) != std::string_view::npos) {
    out.emplace_back(pos, pos + needle.size());
    pos += needle.size();
  }
}

}  // namespace sy::text
