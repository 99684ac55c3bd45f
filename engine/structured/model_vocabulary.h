// Guided decoding's vocabulary of a served model, read from its tokenizer: each id's bytes
// (Tokenizer::token_bytes; special tokens none) and its end tokens (eos).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/structured/token_vocabulary.h"
#include "engine/text/tokenizer.h"

namespace sy::structured {

std::shared_ptr<const TokenVocabulary> vocabulary_from_tokenizer(const text::Tokenizer& tokenizer,
                                                                 std::vector<std::int32_t> end_tokens);

}  // namespace sy::structured
