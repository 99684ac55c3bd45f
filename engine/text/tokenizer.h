// A Hugging Face tokenizer read from a checkpoint's tokenizer.json (+ tokenizer_config.json):
// encodes and decodes exactly as the `tokenizers` library does for the components listed in
// docs/tokenizers.md, and refuses any other component with an error naming it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sy::text {

class Tokenizer {  // movable (pimpl), immutable after load, safe to use from several threads
 public:
  // Reads <model_dir>/tokenizer.json and, when present, <model_dir>/tokenizer_config.json.
  static StatusOr<Tokenizer> load(const std::filesystem::path& model_dir);
  // From the JSON texts themselves (config_json may be empty).
  static StatusOr<Tokenizer> from_json(std::string_view tokenizer_json, std::string_view config_json,
                                       std::string_view origin);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text that is not valid UTF-8 is read with each invalid sequence as U+FFFD. An error where a
  // normalizer or pre-tokenizer regex fails on the text (PCRE2's match limit), naming the regex.
  StatusOr<std::vector<std::int32_t>> try_encode(std::string_view text, bool add_special_tokens) const;
  // try_encode for callers with no way to report an error: no ids where it fails.
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Ids that are no token are skipped, as HF does.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const;
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(std::int32_t id) const;
  std::int32_t vocab_size() const;            // largest id + 1, added tokens included
  bool is_special(std::int32_t id) const;
  // The bytes token `id` adds to generated text mid-sequence (Decoder::token_bytes), for guided
  // decoding; empty for special tokens and ids that are no token.
  std::string token_bytes(std::int32_t id) const;
  std::optional<std::int32_t> bos_token_id() const;  // tokenizer_config.json bos_token, if any
  std::optional<std::int32_t> eos_token_id() const;  // tokenizer_config.json eos_token, if any
  std::string bos_token() const;               // "" when none
  std::string eos_token() const;

  // For IncrementalDetokenizer: whether decode() of ids ending with `id` may still change its
  // last characters when more ids follow (a <0xXX> token under a ByteFallback decoder).
  bool extends_byte_run(std::int32_t id) const;

  struct Impl;  // the parsed pipeline, defined in tokenizer.cpp

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  static StatusOr<Tokenizer> parse(std::string_view tokenizer_json, std::string_view config_json,
                                   const std::string& origin, const std::string& config_origin);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sy::text

#include "engine/text/incremental_detokenizer.h"
