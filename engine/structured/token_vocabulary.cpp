// The sorted vocabulary (token_vocabulary.h).
#include "engine/structured/token_vocabulary.h"

#include <algorithm>

namespace sy::structured {

namespace {

// Plain JSON string content: whole UTF-8 characters (the matcher's rules: no overlong forms,
// surrogates or code points past U+10FFFF), none of them '"', '\\' or below 0x20.
std::int32_t plain_string_chars(const std::string& t) {
  std::int32_t chars = 0;
  std::size_t i = 0;
  while (i < t.size()) {
    const auto b = static_cast<std::uint8_t>(t[i]);
    std::size_t more = 0;
    std::uint8_t lo = 0x80, hi = 0xBF;
    if (b < 0x80) {
      if (b < 0x20 || b == '"' || b == '\\') return -1;
    } else if (b >= 0xC2 && b <= 0xDF) {
      more = 1;
    } else if (b == 0xE0) {
      more = 2, lo = 0xA0;
    } else if (b == 0xED) {
      more = 2, hi = 0x9F;
    } else if (b >= 0xE1 && b <= 0xEF) {
      more = 2;
    } else if (b == 0xF0) {
      more = 3, lo = 0x90;
    } else if (b == 0xF4) {
      more = 3, hi = 0x8F;
    } else if (b >= 0xF1 && b <= 0xF3) {
      more = 3;
    } else {
      return -1;
    }
    ++i;
    for (std::size_t k = 0; k < more; ++k, ++i) {
      if (i >= t.size()) return -1;  // a character the next token would finish: not plain
      const auto c = static_cast<std::uint8_t>(t[i]);
      if (c < lo || c > hi) return -1;
      lo = 0x80;
      hi = 0xBF;
    }
    ++chars;
  }
  return chars;
}

}  // namespace

TokenVocabulary::TokenVocabulary(std::vector<std::string> bytes, std::vector<std::int32_t> end_tokens)
    : bytes_(std::move(bytes)), end_(std::move(end_tokens)) {
  for (std::size_t id = 0; id < bytes_.size(); ++id)
    if (!bytes_[id].empty() && !is_end(static_cast<std::int32_t>(id))) sorted_.push_back(static_cast<std::int32_t>(id));
  std::sort(sorted_.begin(), sorted_.end(), [this](std::int32_t x, std::int32_t y) {
    const std::string& a = bytes_[static_cast<std::size_t>(x)];
    const std::string& b = bytes_[static_cast<std::size_t>(y)];
    return a != b ? a < b : x < y;
  });
  lcp_.assign(sorted_.size(), 0);
  for (std::size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = bytes_[static_cast<std::size_t>(sorted_[i - 1])];
    const std::string& b = bytes_[static_cast<std::size_t>(sorted_[i])];
    std::uint32_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    lcp_[i] = k;
  }
  plain_.resize(bytes_.size());
  for (std::size_t id = 0; id < bytes_.size(); ++id) plain_[id] = bytes_[id].empty() ? -1 : plain_string_chars(bytes_[id]);
}

bool TokenVocabulary::is_end(std::int32_t id) const { return std::find(end_.begin(), end_.end(), id) != end_.end(); }

}  // namespace sy::structured
