// Python's str semantics on UTF-8 text: code-point length, indexing and slicing, whitespace as
// str.isspace() sees it, strip/split/case methods. Templates index and strip message text, so
// these must count characters as Python does, not bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sy::text::jinja {

// Code points of UTF-8 text; invalid bytes decode as U+FFFD (they cannot come from JSON text).
std::u32string utf8_decode(std::string_view s);
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

// str.replace(old, new, count); count < 0 replaces all.
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, std::int64_t count);

// Case mapping: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (the simple one-to-one
// mappings; Python's special cases such as 'ß'.upper() == 'SS' are not reproduced).
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);
std::string py_capitalize(std::string_view s);

}  // namespace sy::text::jinja
