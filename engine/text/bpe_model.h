// The "model" of a tokenizer.json: byte-pair encoding as Hugging Face's BPE does it (merge by
// rank over a linked list of symbols with a priority queue), with unk fusing, byte fallback,
// ignore_merges and a per-word cache.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace sy::text {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
// Ids index dense tables: a file with a larger id is refused rather than allocating for it.
constexpr std::int64_t kMaxTokenId = (1 << 24) - 1;
// Whether `id` is a token id of a file: an integer in [0, kMaxTokenId] (an unsigned value
// beyond int64 too is refused, not wrapped into range).
inline bool is_token_id(const nlohmann::json& id) {
  if (id.is_number_unsigned()) return id.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxTokenId);
  return id.is_number_integer() && id.get<std::int64_t>() >= 0 && id.get<std::int64_t>() <= kMaxTokenId;
}

using Vocab = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  static StatusOr<BpeModel> parse(const nlohmann::json& node, const std::string& origin);
  BpeModel();  // empty: tokenizes nothing
  BpeModel(BpeModel&&) noexcept;
  BpeModel& operator=(BpeModel&&) noexcept;
  ~BpeModel();

  // Appends the ids of one pre-tokenized word. Thread-safe.
  void tokenize(std::string_view word, std::vector<std::int32_t>& out) const;
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(std::int32_t id) const;  // nullptr when not in the vocabulary
  std::int32_t max_id() const { return static_cast<std::int32_t>(id_to_token_.size()) - 1; }
  bool byte_fallback() const { return byte_fallback_; }

 private:
  void merge_word(std::string_view word, std::vector<std::int32_t>& out) const;

  Vocab vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges_;
  std::optional<std::int32_t> unk_id_;
  std::string continuing_subword_prefix_, end_of_word_suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  std::int32_t byte_ids_[256];  // <0xXX> ids, -1 when absent
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace sy::text
