// The "decoder" of a tokenizer.json: turns token strings back into text (ByteLevel, Metaspace,
// Replace, ByteFallback, Fuse, Strip, Sequence; none: tokens joined by spaces).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/text/text_regex.h"

namespace sy::text {

class Decoder {
 public:
  static StatusOr<Decoder> parse(const nlohmann::json& node, const std::string& origin);
  std::string decode(std::vector<std::string> tokens) const;
  // The bytes one token adds to the text in the middle of a sequence (guided decoding's
  // vocabulary): its own steps applied to it alone, raw bytes kept (a <0xXX> token is its byte,
  // a byte-level character its byte, invalid UTF-8 included), and a Strip after a Fuse (which
  // trims the start of the whole text only) skipped.
  std::string token_bytes(const std::string& token) const;
  // True when a ByteFallback step turns a run of <0xXX> tokens into text as a whole: a later
  // byte token can still change what the run decodes to.
  bool groups_byte_tokens() const { return groups_bytes_; }

 private:
  enum class Kind { ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip };
  struct Step {
    Kind kind;
    std::string pattern, content;        // Replace; Strip content; Metaspace replacement
    std::shared_ptr<TextRegex> regex;    // Replace with a regex pattern
    std::size_t start = 0, stop = 0;     // Strip
    bool prepend = true;                 // Metaspace: prepend_scheme is not "never"
  };
  static Status add(const nlohmann::json& node, const std::string& origin, std::vector<Step>& steps);
  // A Replace step applied to one token (decode() and token_bytes() alike).
  static std::string apply_replace(const Step& s, const std::string& token);
  std::vector<Step> steps_;
  bool present_ = false;
  bool groups_bytes_ = false;
};

// "<0xXX>" -> the byte; -1 otherwise (HF's ByteFallback test: six bytes, hex digits).
int byte_token_value(const std::string& token);

}  // namespace sy::text
