// The "pre_tokenizer" of a tokenizer.json: splits normalised text into the words the model
// tokenizes (ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/text/text_regex.h"

namespace sy::text {

// A piece of text on its way to the model. at_origin: it starts at offset 0 of the input
// (Metaspace's prepend_scheme "first" only adds ▁ there).
struct Piece {
  std::string text;
  bool at_origin = false;
};

class PreTokenizer {
 public:
  static StatusOr<PreTokenizer> parse(const nlohmann::json& node, const std::string& origin);
  // Splits `pieces` in place; empty pieces are dropped, as HF does. An error only where a
  // regex fails on a piece (see TextRegex::find_all).
  Status apply(std::vector<Piece>& pieces) const;

 private:
  enum class Kind { ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit };
  enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
  enum class Prepend { Always, First, Never };
  struct Step {
    Kind kind;
    std::shared_ptr<TextRegex> regex;  // Split (regex), ByteLevel (use_regex), Whitespace
    std::string literal;               // Split (string pattern); Metaspace replacement
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;     // ByteLevel
    Prepend prepend = Prepend::Always;  // Metaspace
    bool split = true;                 // Metaspace
    bool individual_digits = false;    // Digits
  };
  static Status add(const nlohmann::json& node, const std::string& origin, std::vector<Step>& steps);
  Status apply_step(const Step& s, const Piece& piece, std::vector<Piece>& out) const;
  std::vector<Step> steps_;
};

}  // namespace sy::text
