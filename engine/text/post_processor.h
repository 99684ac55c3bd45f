// The "post_processor" of a tokenizer.json: what encode(add_special_tokens=true) adds around
// the text's ids (TemplateProcessing; ByteLevel and null add nothing; Sequence of these).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace sy::text {

class PostProcessor {
 public:
  static StatusOr<PostProcessor> parse(const nlohmann::json& node, const std::string& origin);
  // A template from ids: [bos] $A [eos], as transformers' Llama tokenizer builds from
  // tokenizer_config.json's add_bos_token / add_eos_token.
  static PostProcessor bos_eos(std::vector<std::int32_t> bos, std::vector<std::int32_t> eos);
  std::vector<std::int32_t> apply(std::vector<std::int32_t> ids) const;

 private:
  // One template per TemplateProcessing, in order; an item is either the sequence (empty
  // `ids`, is_sequence) or the ids of a special token.
  struct Item {
    bool is_sequence = false;
    std::vector<std::int32_t> ids;
  };
  std::vector<std::vector<Item>> templates_;
  static Status add(const nlohmann::json& node, const std::string& origin, PostProcessor& p);
};

}  // namespace sy::text
