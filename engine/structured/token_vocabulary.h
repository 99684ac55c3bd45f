// A model's vocabulary as guided decoding sees it: each token id's bytes in the output (special
// tokens and ids without a token have none), sorted so that the token mask walks shared
// prefixes once (a trie laid out as a sorted list with common-prefix lengths).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sy::structured {

class TokenVocabulary {
 public:
  // bytes[id]: the token's bytes; empty: never allowed (special, padding, no token).
  // `end_tokens`: the ids that end the output (the model's eos), allowed where the grammar may end.
  TokenVocabulary(std::vector<std::string> bytes, std::vector<std::int32_t> end_tokens);

  std::int32_t size() const { return static_cast<std::int32_t>(bytes_.size()); }
  const std::string& bytes(std::int32_t id) const { return bytes_[static_cast<std::size_t>(id)]; }
  const std::vector<std::int32_t>& end_tokens() const { return end_; }
  bool is_end(std::int32_t id) const;

  // The tokens with bytes in byte order, and for each the length of the prefix it shares with
  // the one before it (0 for the first).
  const std::vector<std::int32_t>& sorted() const { return sorted_; }
  const std::vector<std::uint32_t>& shared_prefix() const { return lcp_; }
  // For each id: how many characters its bytes are when they are plain JSON string content
  // (whole valid UTF-8 characters, no '"', '\\' or control byte), else -1. Inside a string such
  // a token's fate depends only on the room left (Matcher::string_room).
  const std::vector<std::int32_t>& plain_chars() const { return plain_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<std::int32_t> end_;
  std::vector<std::int32_t> sorted_;
  std::vector<std::uint32_t> lcp_;
  std::vector<std::int32_t> plain_;
};

}  // namespace sy::structured
