// Python's str semantics on UTF-8 text: code-point length, indexing and slicing, whitespace as
// str.isspace() sees it, strip/split/case methods. Templates index and strip message text, so
// these must count characters as Python does, not bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sy::text::jinja {

// The errors of a result that outgrows the limit on one value (RenderLimits::max_output_bytes
// bytes, a list an eighth as many items), naming what built it:
// "join: the result exceeds the limit of 67108864 bytes".
Status result_too_large(std::string_view what, std::size_t limit_bytes);
Status result_too_long(std::string_view what, std::size_t max_items);

// Text built piece by piece up to a limit. Printing, serialising, joining or replacing can make
// a result far larger than its operands (a list holding one large string many times), so the
// limit is checked as the text grows rather than once it is whole. An append that would pass
// the limit fills it and marks the text full, builders stop at the next item once full(), and
// take() then gives the error.
class BoundedText {
 public:
  BoundedText(std::string_view what, std::size_t limit) : what_(what), limit_(limit) {}
  BoundedText& operator+=(std::string_view s) {
    if (s.size() > limit_ - text_.size()) {
      text_ += s.substr(0, limit_ - text_.size());
      full_ = true;
    } else {
      text_ += s;
    }
    return *this;
  }
  BoundedText& operator+=(char c) { return *this += std::string_view(&c, 1); }
  bool full() const { return full_; }
  const std::string& text() const { return text_; }  // the first `limit` bytes once full
  StatusOr<std::string> take();

 private:
  std::string what_;
  std::size_t limit_;
  std::string text_;
  bool full_ = false;
};

// Code points of UTF-8 text; invalid bytes decode as U+FFFD (they cannot come from JSON text).
std::u32string utf8_decode(std::string_view s);
// The code point at s[i] (i < s.size()), advancing i past it; an invalid byte is U+FFFD.
char32_t utf8_next(std::string_view s, std::size_t& i);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);

// str.isspace() for one code point.
bool py_isspace(char32_t cp);
// str.isalpha(), str.isdigit(), str.isalnum() for one code point, by Python's definitions over
// utf8proc's general categories: letters (L*); Nd plus the Numeric_Type=Digit characters
// (superscripts, circled digits, ...); letters or numbers (L*, Nd, Nl, No).
bool py_isalpha(char32_t cp);
bool py_isdigit(char32_t cp);
bool py_isalnum(char32_t cp);
bool py_isdecimal(char32_t cp);  // Nd
bool py_isnumeric(char32_t cp);  // Nd, Nl, No and the ideographs with a numeric value (一, 万)

std::size_t py_len(std::string_view s);

// str.strip/lstrip/rstrip: `chars` absent strips whitespace.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);

// str.split(sep, maxsplit) and str.rsplit: sep absent splits on whitespace runs.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit);

// str.replace(old, new, count) appended to `out`; count < 0 replaces all. A result can be far
// larger than s (every character of a large string replaced by a large string).
void py_replace(BoundedText& out, std::string_view s, std::string_view old, std::string_view repl, std::int64_t count);

// Case mapping: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (the simple one-to-one
// mappings; Python's special cases such as 'ß'.upper() == 'SS' are not reproduced).
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);

}  // namespace sy::text::jinja
