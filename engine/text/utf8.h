// UTF-8 helpers with the exact semantics of the Rust code Hugging Face tokenizers is written in:
// lossy decoding, char::is_whitespace, regex \w, and the GPT-2 byte-to-character alphabet.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sy::text {

// Length in bytes of the UTF-8 sequence that starts with byte `lead` (1 for a stray byte).
inline std::size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Decodes the code point at s[i] (s must be valid UTF-8) and advances i past it.
char32_t next_code_point(std::string_view s, std::size_t& i);
void append_utf8(std::string& out, char32_t cp);

// Rust's String::from_utf8_lossy: every maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);
bool is_valid_utf8(std::string_view bytes);

// Rust's char::is_whitespace (the Unicode White_Space property).
bool is_whitespace(char32_t c);
// Rust's char::is_numeric (general categories Nd, Nl, No).
bool is_numeric(char32_t c);
// Rust regex's Unicode \w: alphabetic, marks, decimal digits, connector punctuation, joiners.
bool is_word_char(char32_t c);

// The GPT-2 byte-level alphabet: byte -> the code point that stands for it, and back.
char32_t byte_to_char(unsigned char b);
// -1 when `c` is not in the alphabet.
int char_to_byte(char32_t c);

}  // namespace sy::text
