// A vocabulary of about 150k byte strings shaped like a byte-level BPE's (every byte, then words
// and pieces with and without a leading space, punctuation runs, digits), for the mask's cost
// tests: the repo holds no real 150k tokenizer. Its last id is the end token (no bytes).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/structured/token_vocabulary.h"

namespace sy::structured {

inline TokenVocabulary synthetic_vocabulary() {
  std::mt19937_64 rng(7);
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  const std::string letters = "etaoinshrdlucmfwypvbgkjqxz";
  const std::string punct = "{}[]\":,.-_ \n\t0123456789";
  while (bytes.size() < 150000) {
    std::string t;
    const auto r = rng() % 10;
    if (r < 6) {
      if (rng() % 2) t += ' ';
      const auto len = 2 + rng() % 8;
      for (std::size_t k = 0; k < len; ++k) t += letters[rng() % (k == 0 ? letters.size() : 12 + k % 14)];
    } else if (r < 8) {
      const auto len = 1 + rng() % 4;
      for (std::size_t k = 0; k < len; ++k) t += punct[rng() % punct.size()];
    } else {
      const auto len = 1 + rng() % 3;
      for (std::size_t k = 0; k < len; ++k) t += static_cast<char>('0' + rng() % 10);
    }
    bytes.push_back(std::move(t));
  }
  const auto eos = static_cast<std::int32_t>(bytes.size());
  bytes.emplace_back();  // the end token has no bytes
  return TokenVocabulary(std::move(bytes), {eos});
}

}  // namespace sy::structured
