// The allowed-token set for a guided sequence's next step: every vocabulary token whose bytes
// the matcher takes from its current state, plus the end tokens where the output may end (and
// only they once it is complete). A bit per token id, 32 to a word.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/structured/matcher.h"
#include "engine/structured/token_vocabulary.h"

namespace sy::structured {

inline bool mask_allows(std::span<const std::uint32_t> mask, std::int32_t id) {
  const auto word = static_cast<std::size_t>(id) / 32;
  return word < mask.size() && (mask[word] >> (static_cast<std::uint32_t>(id) % 32) & 1u) != 0;
}

// The fast mask: walks the sorted vocabulary as a trie, feeding each shared prefix once and
// skipping every token under a prefix the matcher refused. `mask` is resized to `words` words
// (≥ the vocabulary's) and overwritten.
void compute_token_mask(const Matcher& matcher, const TokenVocabulary& vocab, std::size_t words,
                        std::vector<std::uint32_t>& mask);

// The reference: every token fed byte by byte to its own copy of the matcher (tests).
void naive_token_mask(const Matcher& matcher, const TokenVocabulary& vocab, std::size_t words,
                      std::vector<std::uint32_t>& mask);

}  // namespace sy::structured
