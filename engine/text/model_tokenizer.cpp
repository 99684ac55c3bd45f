// Tokenizer files of random models (see model_tokenizer.h).
#include "engine/text/model_tokenizer.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/sim/hardware_profile.h"
#include "engine/text/tokenizer.h"

namespace sy::text {

namespace fs = std::filesystem;

StatusOr<std::string> tokenizer_style(Arch arch) {
  switch (arch) {
    case Arch::Mixtral: return std::string("llama");
    case Arch::Qwen2Moe:
    case Arch::Qwen3Moe: return std::string("qwen2");
    // OLMoE's own tokenizer is GPT-NeoX's byte-level BPE; the small byte-level one of the qwen2
    // asset stands in for it, with OLMoE's tokenizer_config (family_config).
    case Arch::Olmoe: return std::string("qwen2");
    case Arch::Dbrx: break;
  }
  return Status::Error(arch_name(arch) + ": no tokenizer asset for this architecture");
}

namespace {

StatusOr<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// tokenizer_config.json as the published checkpoints of the family write it.
nlohmann::ordered_json family_config(Arch arch, const ModelConfig& config) {
  nlohmann::ordered_json c;
  if (arch == Arch::Mixtral) {
    c["add_bos_token"] = true;
    c["add_eos_token"] = false;
    c["bos_token"] = "<s>";
    c["clean_up_tokenization_spaces"] = false;
    c["eos_token"] = "</s>";
    c["legacy"] = true;
    c["model_max_length"] = config.max_position_embeddings;
    c["pad_token"] = nullptr;
    c["spaces_between_special_tokens"] = false;
    c["tokenizer_class"] = "LlamaTokenizer";
    c["unk_token"] = "<unk>";
    c["use_default_system_prompt"] = false;
  } else {
    c["add_prefix_space"] = false;
    c["bos_token"] = nullptr;
    c["clean_up_tokenization_spaces"] = false;
    c["eos_token"] = "<|im_end|>";
    c["errors"] = "replace";
    c["model_max_length"] = config.max_position_embeddings;
    c["pad_token"] = "<|endoftext|>";
    c["split_special_tokens"] = false;
    c["tokenizer_class"] = "Qwen2Tokenizer";
    c["unk_token"] = nullptr;
  }
  if (arch == Arch::Olmoe) {
    // allenai/OLMoE-1B-7B's: no bos added, <|endoftext|> ends a sequence.
    c["add_bos_token"] = false;
    c["add_eos_token"] = false;
    c["eos_token"] = "<|endoftext|>";
    c["tokenizer_class"] = "GPTNeoXTokenizer";
  }
  return c;
}

}  // namespace

StatusOr<std::vector<ModelFile>> model_tokenizer_files(ModelConfig& config) {
  auto style = tokenizer_style(config.arch);
  if (!style.ok()) return style.status();
  const fs::path assets = assets_dir();
  const fs::path tokenizer_path = assets / "tokenizers" / *style / "tokenizer.json";
  auto tokenizer_json = read_text(tokenizer_path);
  if (!tokenizer_json.ok()) return tokenizer_json.status();

  nlohmann::ordered_json tc = family_config(config.arch, config);
  const fs::path template_path = assets / "chat_templates" / (arch_name(config.arch) + ".jinja");
  std::error_code ec;
  if (fs::is_regular_file(template_path, ec)) {
    auto chat_template = read_text(template_path);
    if (!chat_template.ok()) return chat_template.status();
    tc["chat_template"] = *chat_template;
  }
  const std::string config_text = tc.dump(2) + "\n";

  auto tok = Tokenizer::from_json(*tokenizer_json, config_text, tokenizer_path.string());
  if (!tok.ok()) return tok.status();
  if (tok->vocab_size() > config.vocab_size)
    return Status::Error("the tokenizer " + tokenizer_path.string() + " has " + std::to_string(tok->vocab_size()) +
                         " tokens but the " + arch_name(config.arch) + " model's vocab_size is " +
                         std::to_string(config.vocab_size) + ": vocab_size must be at least the tokenizer's");
  config.eos_token_id = tok->eos_token_id();
  config.bos_token_id = config.arch == Arch::Mixtral ? tok->bos_token_id() : tok->token_to_id("<|endoftext|>");
  if (!config.eos_token_id || !config.bos_token_id)
    return Status::Error(tokenizer_path.string() + ": lacks the bos or eos token of " + arch_name(config.arch));
  return std::vector<ModelFile>{{"tokenizer.json", std::move(*tokenizer_json)},
                                {"tokenizer_config.json", config_text}};
}

}  // namespace sy::text
