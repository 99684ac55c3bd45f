// make-model's tokenizer files: a made model's tokenizer loads from its directory, round-trips
// text, and agrees with its config.json on bos/eos and the vocabulary size.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "engine/model/model_config.h"
#include "engine/model/random_model.h"
#include "engine/sim/hardware_profile.h"
#include "engine/text/model_tokenizer.h"
#include "engine/text/tokenizer.h"

namespace sy::text {
namespace {

namespace fs = std::filesystem;

class ModelTokenizer : public ::testing::TestWithParam<Arch> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sy_test_model_tokenizer_" + std::to_string(::getpid()) + "_" +
                                        arch_name(GetParam()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(ModelTokenizer, MadeModelServesText) {
  ModelConfig config = preset_config(GetParam(), ModelPreset::Tiny, kernels::DType::F32);
  auto files = model_tokenizer_files(config);
  ASSERT_TRUE(files.ok()) << files.status().message();
  ASSERT_TRUE(write_random_model(config, 1, dir_, 2ull << 30, *files).ok());

  auto tok = Tokenizer::load(dir_);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  auto written = ModelConfig::from_file(dir_ / "config.json");
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_LE(tok->vocab_size(), written->vocab_size);
  ASSERT_TRUE(tok->eos_token_id());
  EXPECT_EQ(written->eos_token_id, tok->eos_token_id());
  ASSERT_TRUE(written->bos_token_id);

  const bool mixtral = GetParam() == Arch::Mixtral;
  const bool olmoe = GetParam() == Arch::Olmoe;  // OLMoE's tokenizer_config over a byte-level BPE
  EXPECT_EQ(tok->eos_token(), mixtral ? "</s>" : olmoe ? "<|endoftext|>" : "<|im_end|>");
  EXPECT_EQ(tok->bos_token(), mixtral ? "<s>" : "");
  EXPECT_EQ(tok->id_to_token(*written->bos_token_id), mixtral ? "<s>" : "<|endoftext|>");

  const std::string text = "Hello, world! Привет 你好 🙂\n\tdef f(x): return 42";
  const auto ids = tok->encode(text, false);
  EXPECT_FALSE(ids.empty());
  for (auto id : ids) EXPECT_LT(id, written->vocab_size);
  EXPECT_EQ(tok->decode(ids, false), text);
  const auto with_bos = tok->encode(text, true);
  EXPECT_EQ(with_bos.size(), ids.size() + (mixtral ? 1 : 0));  // Llama adds <s>; Qwen adds nothing
  EXPECT_EQ(tok->decode(with_bos, true), text);

  // The chat template travels in tokenizer_config.json when the asset exists.
  const fs::path jinja = assets_dir() / "chat_templates" / (arch_name(GetParam()) + ".jinja");
  const bool has_template = fs::exists(jinja);
  std::ifstream in(dir_ / "tokenizer_config.json");
  const auto config_json = nlohmann::json::parse(in);
  EXPECT_EQ(config_json.contains("chat_template"), has_template);
}

INSTANTIATE_TEST_SUITE_P(Arches, ModelTokenizer, ::testing::Values(Arch::Mixtral, Arch::Qwen2Moe, Arch::Qwen3Moe, Arch::Olmoe),
                         [](const auto& param_info) { return arch_name(param_info.param); });

TEST(ModelTokenizerFiles, RefusesAVocabularySmallerThanTheTokenizer) {
  ModelConfig config = preset_config(Arch::Qwen3Moe, ModelPreset::Tiny, kernels::DType::F32);
  config.vocab_size = 300;
  auto asset = Tokenizer::load(assets_dir() / "tokenizers" / "qwen2");
  ASSERT_TRUE(asset.ok());
  auto files = model_tokenizer_files(config);
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.status().message().find("has " + std::to_string(asset->vocab_size()) +
                                          " tokens but the qwen3_moe model's vocab_size is 300"),
            std::string::npos)
      << files.status().message();
  config.arch = Arch::Dbrx;
  EXPECT_FALSE(model_tokenizer_files(config).ok());
}

}  // namespace
}  // namespace sy::text
