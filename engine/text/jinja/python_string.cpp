#include "engine/text/jinja/python_string.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include <utf8proc.h>

namespace sy::text::jinja {

Status result_too_large(std::string_view what, std::size_t limit_bytes) {
  return Status::Error(std::string(what) + ": the result exceeds the limit of " + std::to_string(limit_bytes) +
                       " bytes");
}

Status result_too_long(std::string_view what, std::size_t max_items) {
  return Status::Error(std::string(what) + ": the result exceeds " + std::to_string(max_items) + " items");
}

StatusOr<std::string> BoundedText::take() {
  if (full_) return result_too_large(what_, limit_);
  return std::move(text_);
}

char32_t utf8_next(std::string_view s, std::size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  int len = 0;
  char32_t cp = 0;
  if (c < 0x80) { ++i; return c; }
  if ((c & 0xE0) == 0xC0) { cp = c & 0x1F; len = 2; }
  else if ((c & 0xF0) == 0xE0) { cp = c & 0x0F; len = 3; }
  else if ((c & 0xF8) == 0xF0) { cp = c & 0x07; len = 4; }
  else { ++i; return 0xFFFD; }
  if (i + static_cast<std::size_t>(len) > s.size()) { ++i; return 0xFFFD; }
  for (int k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
    if ((cc & 0xC0) != 0x80) { ++i; return 0xFFFD; }
    cp = (cp << 6) | (cc & 0x3F);
  }
  i += static_cast<std::size_t>(len);
  return cp;
}

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) out.push_back(utf8_next(s, i));
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) utf8_append(out, cp);
  return out;
}

bool py_isspace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

namespace {

utf8proc_category_t category(char32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)); }

bool is_letter(utf8proc_category_t c) {
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
         c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_LO;
}

// Numeric_Type=Digit (Python's isdigit beyond Nd), which utf8proc does not expose: every such
// character is in No; the ranges are those of Python 3.11's unicodedata (Unicode 14).
constexpr std::pair<char32_t, char32_t> kDigitNo[] = {
    {0xB2, 0xB3},       {0xB9, 0xB9},       {0x1369, 0x1371},   {0x19DA, 0x19DA},  {0x2070, 0x2070},
    {0x2074, 0x2079},   {0x2080, 0x2089},   {0x2460, 0x2468},   {0x2474, 0x247C},  {0x2488, 0x2490},
    {0x24EA, 0x24EA},   {0x24F5, 0x24FD},   {0x24FF, 0x24FF},   {0x2776, 0x277E},  {0x2780, 0x2788},
    {0x278A, 0x2792},   {0x10A40, 0x10A43}, {0x10E60, 0x10E68}, {0x11052, 0x1105A}, {0x1F100, 0x1F10A}};

// The ideographs with a numeric value (Unihan's kPrimaryNumeric, kAccountingNumeric,
// kOtherNumeric: 一, 万, 壱, ...), which Python's isnumeric counts beyond the N* categories; all
// are Lo. From Python 3.11's unicodedata (Unicode 14), like kDigitNo.
constexpr std::pair<char32_t, char32_t> kNumericLo[] = {
    {0x3405, 0x3405}, {0x3483, 0x3483}, {0x382A, 0x382A}, {0x3B4D, 0x3B4D}, {0x4E00, 0x4E00},
    {0x4E03, 0x4E03}, {0x4E07, 0x4E07}, {0x4E09, 0x4E09}, {0x4E5D, 0x4E5D}, {0x4E8C, 0x4E8C},
    {0x4E94, 0x4E94}, {0x4E96, 0x4E96}, {0x4EBF, 0x4EC0}, {0x4EDF, 0x4EDF}, {0x4EE8, 0x4EE8},
    {0x4F0D, 0x4F0D}, {0x4F70, 0x4F70}, {0x5104, 0x5104}, {0x5146, 0x5146}, {0x5169, 0x5169},
    {0x516B, 0x516B}, {0x516D, 0x516D}, {0x5341, 0x5341}, {0x5343, 0x5345}, {0x534C, 0x534C},
    {0x53C1, 0x53C4}, {0x56DB, 0x56DB}, {0x58F1, 0x58F1}, {0x58F9, 0x58F9}, {0x5E7A, 0x5E7A},
    {0x5EFE, 0x5EFF}, {0x5F0C, 0x5F0E}, {0x5F10, 0x5F10}, {0x62FE, 0x62FE}, {0x634C, 0x634C},
    {0x67D2, 0x67D2}, {0x6F06, 0x6F06}, {0x7396, 0x7396}, {0x767E, 0x767E}, {0x8086, 0x8086},
    {0x842C, 0x842C}, {0x8CAE, 0x8CAE}, {0x8CB3, 0x8CB3}, {0x8D30, 0x8D30}, {0x9621, 0x9621},
    {0x9646, 0x9646}, {0x964C, 0x964C}, {0x9678, 0x9678}, {0x96F6, 0x96F6}, {0xF96B, 0xF96B},
    {0xF973, 0xF973}, {0xF978, 0xF978}, {0xF9B2, 0xF9B2}, {0xF9D1, 0xF9D1}, {0xF9D3, 0xF9D3},
    {0xF9FD, 0xF9FD}, {0x20001, 0x20001}, {0x20064, 0x20064}, {0x200E2, 0x200E2}, {0x20121, 0x20121},
    {0x2092A, 0x2092A}, {0x20983, 0x20983}, {0x2098C, 0x2098C}, {0x2099C, 0x2099C}, {0x20AEA, 0x20AEA},
    {0x20AFD, 0x20AFD}, {0x20B19, 0x20B19}, {0x22390, 0x22390}, {0x22998, 0x22998}, {0x23B1B, 0x23B1B},
    {0x2626D, 0x2626D}, {0x2F890, 0x2F890}};

template <std::size_t N>
bool in_ranges(const std::pair<char32_t, char32_t> (&ranges)[N], char32_t cp) {
  return std::any_of(std::begin(ranges), std::end(ranges), [cp](const auto& r) { return cp >= r.first && cp <= r.second; });
}

bool is_number(utf8proc_category_t c) {
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

}  // namespace

bool py_isalpha(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  return is_letter(category(cp));
}

bool py_isdigit(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  const auto c = category(cp);
  if (c == UTF8PROC_CATEGORY_ND) return true;
  return c == UTF8PROC_CATEGORY_NO && in_ranges(kDigitNo, cp);
}

bool py_isdecimal(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return category(cp) == UTF8PROC_CATEGORY_ND;
}

// Numeric_Type Digit, Decimal or Numeric: every character of Nd, Nl and No has one, and the
// numeric ideographs are the only others.
bool py_isnumeric(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  const auto c = category(cp);
  return is_number(c) || (c == UTF8PROC_CATEGORY_LO && in_ranges(kNumericLo, cp));
}

// Python: isalpha or isdecimal or isdigit or isnumeric. The numeric ideographs (一, 二, 万,
// ...) are Lo, so this is letters and the three number categories.
bool py_isalnum(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9');
  const auto c = category(cp);
  return is_letter(c) || is_number(c);
}

std::size_t py_len(std::string_view s) {
  std::size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string text = utf8_decode(s);
  const std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strip_this = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : py_isspace(c); };
  std::size_t b = 0, e = text.size();
  if (left)
    while (b < e && strip_this(text[b])) ++b;
  if (right)
    while (e > b && strip_this(text[e - 1])) --e;
  return utf8_encode(std::u32string_view(text).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    std::size_t start = 0;
    while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
      const std::size_t pos = s.find(*sep, start);
      if (pos == std::string_view::npos) break;
      out.emplace_back(s.substr(start, pos - start));
      start = pos + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  const std::u32string text = utf8_decode(s);
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && py_isspace(text[i])) ++i;
    if (i == text.size()) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
      out.push_back(utf8_encode(std::u32string_view(text).substr(i)));
      return out;
    }
    std::size_t j = i;
    while (j < text.size() && !py_isspace(text[j])) ++j;
    out.push_back(utf8_encode(std::u32string_view(text).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, std::int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    std::size_t end = s.size();
    while (static_cast<std::int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const std::size_t pos = s.rfind(*sep, end - sep->size());
      if (pos == std::string_view::npos) break;
      out.emplace_back(s.substr(pos + sep->size(), end - pos - sep->size()));
      end = pos;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    const std::u32string text = utf8_decode(s);
    std::size_t e = text.size();
    while (e > 0) {
      while (e > 0 && py_isspace(text[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<std::int64_t>(out.size()) == maxsplit) {
        out.push_back(utf8_encode(std::u32string_view(text).substr(0, e)));
        break;
      }
      std::size_t b = e;
      while (b > 0 && !py_isspace(text[b - 1])) --b;
      out.push_back(utf8_encode(std::u32string_view(text).substr(b, e - b)));
      e = b;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

void py_replace(BoundedText& out, std::string_view s, std::string_view old, std::string_view repl, std::int64_t count) {
  if (old.empty()) {
    // Python inserts `repl` before every character and at the end.
    std::int64_t n = 0;
    std::string one;
    for (std::size_t i = 0; i < s.size() && !out.full();) {
      if (count < 0 || n < count) { out += repl; ++n; }
      one.clear();
      utf8_append(one, utf8_next(s, i));
      out += one;
    }
    if (count < 0 || n < count) out += repl;
    return;
  }
  std::size_t start = 0;
  std::int64_t n = 0;
  while ((count < 0 || n < count) && !out.full()) {
    const std::size_t pos = s.find(old, start);
    if (pos == std::string_view::npos) break;
    out += s.substr(start, pos - start);
    out += repl;
    start = pos + old.size();
    ++n;
  }
  out += s.substr(start);
}

namespace {

char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
    if (c == 0x130 || c == 0x138 || c == 0x149 || c == 0x178) return c;
    return (c % 2 == 1) ? c - 1 : c;
  }
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 0x20;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  return c;
}

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130) return 'i';
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
    if (c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F) return c;
    return (c % 2 == 0) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

bool is_cased(char32_t c) { return to_upper(c) != c || to_lower(c) != c; }

template <class F>
std::string map_chars(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) utf8_append(out, f(c));
  return out;
}

}  // namespace

std::string py_upper(std::string_view s) { return map_chars(s, to_upper); }
std::string py_lower(std::string_view s) { return map_chars(s, to_lower); }

std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : utf8_decode(s)) {
    utf8_append(out, prev_cased ? to_lower(c) : to_upper(c));
    prev_cased = is_cased(c);
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t c : utf8_decode(s)) {
    utf8_append(out, first ? to_upper(c) : to_lower(c));
    first = false;
  }
  return out;
}

}  // namespace sy::text::jinja
