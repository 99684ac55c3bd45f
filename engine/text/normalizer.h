// The "normalizer" of a tokenizer.json: Unicode normalisation forms, Sequence, Prepend,
// Replace, Lowercase and Strip, applied to the text between added tokens.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/text/text_regex.h"

namespace sy::text {

class Normalizer {
 public:
  // `node` is the JSON value of "normalizer" (null: no normalisation); `origin` names the file.
  static StatusOr<Normalizer> parse(const nlohmann::json& node, const std::string& origin);
  bool empty() const { return steps_.empty(); }
  // An error only where a Replace regex fails on the text (see TextRegex::find_all).
  StatusOr<std::string> apply(std::string text) const;

 private:
  enum class Kind { NFC, NFD, NFKC, NFKD, Lowercase, Strip, Prepend, ReplaceString, ReplaceRegex };
  struct Step {
    Kind kind;
    std::string pattern, content;  // Prepend: content; Replace: pattern -> content
    std::shared_ptr<TextRegex> regex;
    bool left = false, right = false;  // Strip
  };
  static Status add(const nlohmann::json& node, const std::string& origin, std::vector<Step>& steps);
  std::vector<Step> steps_;
};

// Replaces every non-overlapping match (of a regex or a literal) with `content`.
std::string replace_all(const std::string& text, const std::vector<Span>& matches, const std::string& content);

}  // namespace sy::text
