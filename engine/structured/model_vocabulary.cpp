// Guided decoding's vocabulary from a tokenizer (model_vocabulary.h).
#include "engine/structured/model_vocabulary.h"

namespace sy::structured {

std::shared_ptr<const TokenVocabulary> vocabulary_from_tokenizer(const text::Tokenizer& tokenizer,
                                                                 std::vector<std::int32_t> end_tokens) {
  std::vector<std::string> bytes(static_cast<std::size_t>(tokenizer.vocab_size()));
  for (std::int32_t id = 0; id < tokenizer.vocab_size(); ++id) bytes[static_cast<std::size_t>(id)] = tokenizer.token_bytes(id);
  return std::make_shared<const TokenVocabulary>(std::move(bytes), std::move(end_tokens));
}

}  // namespace sy::structured
