// What the structured tests share: the repository's tokenizers as mask vocabularies, and
// grammars compiled from schema text.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/structured/grammar.h"
#include "engine/structured/model_vocabulary.h"
#include "engine/structured/schema_compiler.h"
#include "engine/text/tokenizer.h"

namespace sy::structured {

// assets/tokenizers/<family> (llama or qwen2) with its eos as the end token.
inline std::shared_ptr<const TokenVocabulary> load(const char* family) {
  auto t = text::Tokenizer::load(std::string(SY_SOURCE_DIR) + "/assets/tokenizers/" + family);
  EXPECT_TRUE(t.ok()) << t.status().message();
  const auto eos = t->token_to_id(std::string(family) == "llama" ? "</s>" : "<|endoftext|>");
  EXPECT_TRUE(eos.has_value());
  return vocabulary_from_tokenizer(*t, {*eos});
}

inline std::shared_ptr<const Grammar> schema(const std::string& text) {
  auto g = compile_schema(nlohmann::json::parse(text));
  EXPECT_TRUE(g.ok()) << g.status().message();
  return *g;
}

}  // namespace sy::structured
