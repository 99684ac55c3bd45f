// The "added_tokens" of a tokenizer.json, split out of the text before the model sees it
// exactly as HF's AddedVocabulary does: leftmost-longest matching, the tokens that are not
// "normalized" on the raw text first, the others on each normalised remainder, with the
// single_word, lstrip and rstrip rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace sy::text {

class Normalizer;

struct AddedToken {
  std::int32_t id = 0;
  std::string content;
  // What id_to_token() and decode() give: for a normalized token HF keeps the normalised
  // content ("hi there" under Llama's normaliser comes back as "▁hi▁there").
  std::string token;
  bool special = false, normalized = false, lstrip = false, rstrip = false, single_word = false;
};

// A stretch of text: either an added token (id >= 0) or text for the model (id -1).
struct Segment {
  std::size_t begin, end;
  std::int32_t id;
};

class AddedVocabulary {
 public:
  // `normalizer` normalises the patterns of the normalized tokens.
  static StatusOr<AddedVocabulary> parse(const nlohmann::json& node, const Normalizer& normalizer,
                                         const std::string& origin);
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find(std::int32_t id) const;
  const AddedToken* find(std::string_view content) const;

  // Splits `text` by the tokens that match on the raw (normalized=false) or the normalised
  // (normalized=true) text.
  void split(std::string_view text, bool normalized, std::vector<Segment>& out) const;

 private:
  struct Pattern {
    std::string text;
    std::size_t token;  // index into tokens_
  };
  // Per first byte, the patterns starting with it, longest first (ties: first added).
  std::vector<std::vector<Pattern>> raw_, norm_;
  std::vector<AddedToken> tokens_;
  std::vector<std::int32_t> by_id_;  // id -> index into tokens_, or -1
};

}  // namespace sy::text
