// The tokenizer files `make-model` writes beside a random model: the small tokenizer of the
// architecture's family (assets/tokenizers/<llama|qwen2>/tokenizer.json) and a
// tokenizer_config.json with the family's bos/eos tokens and chat template.
#pragma once

#include <vector>

#include "base/status.h"
#include "engine/model/model_config.h"
#include "engine/model/random_model.h"

namespace sy::text {

// "llama" for mixtral, "qwen2" for qwen2_moe and qwen3_moe.
StatusOr<std::string> tokenizer_style(Arch arch);

// tokenizer.json and tokenizer_config.json for `config`'s architecture, read from
// assets_dir(). Sets config's bos_token_id / eos_token_id to the tokenizer's ids, as the
// published configs have them (Mixtral <s> / </s>; Qwen <|endoftext|> / <|im_end|>), and
// refuses a vocab_size smaller than the tokenizer's.
StatusOr<std::vector<ModelFile>> model_tokenizer_files(ModelConfig& config);

}  // namespace sy::text
