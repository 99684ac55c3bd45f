// PCRE2 behind TextRegex (see text_regex.h).
#include "engine/text/text_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "engine/text/utf8.h"

namespace sy::text {

struct TextRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

StatusOr<TextRegex> TextRegex::compile(std::string_view pattern, const std::string& what) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    return Status::Error(what + ": regex '" + std::string(pattern) + "' does not compile at offset " +
                         std::to_string(offset) + ": " + reinterpret_cast<const char*>(message));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // interpreted when the JIT is unavailable
  auto owned = std::make_shared<Code>();
  owned->code = code;
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

}  // namespace

void TextRegex::find_all(std::string_view text, std::vector<Span>& out) const {
  MatchData md(code_->code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t pos = 0;
  std::size_t last_end = std::string_view::npos;
  while (pos <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md.data, nullptr);
    if (rc < 0) break;
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
