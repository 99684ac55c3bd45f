// The fixture of the HTTP tests that speak text: a tiny random model with its architecture's
// tokenizer, written once per suite to a directory of its own and loaded with its TextSupport.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "engine/model/random_model.h"
#include "engine/serving/http/text_support.h"
#include "engine/text/model_tokenizer.h"

namespace sy::http {

// `Suite` (the deriving fixture, CRTP) gives each suite statics of its own.
template <class Suite>
class TinyTextModelSuite : public ::testing::Test {
 protected:
  // Call from SetUpTestSuite under ASSERT_NO_FATAL_FAILURE. `tag` names the directory;
  // `edit_config` changes the config before the model is written, `edit_files` the directory
  // after (e.g. tokens added to tokenizer.json).
  static void set_up_model(Arch arch, const std::string& tag,
                           const std::function<void(ModelConfig&)>& edit_config = {},
                           const std::function<void(const std::filesystem::path&)>& edit_files = {}) {
    dir_ = std::filesystem::temp_directory_path() / ("sy_test_http_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    ModelConfig c = preset_config(arch, ModelPreset::Tiny, kernels::DType::F32);
    if (edit_config) edit_config(c);
    auto files = text::model_tokenizer_files(c);
    ASSERT_TRUE(files.ok()) << files.status().message();
    ASSERT_TRUE(write_random_model(c, 1, dir_, 2ull << 30, *files).ok());
    if (edit_files) edit_files(dir_);
    auto weights = ModelWeights::load(dir_);
    ASSERT_TRUE(weights.ok()) << weights.status().message();
    weights_ = *weights;
    auto t = TextSupport::load(dir_);
    ASSERT_TRUE(t.ok()) << t.status().message();
    text_ = new TextSupport(std::move(t).value());
  }
  static void TearDownTestSuite() {
    delete text_;
    text_ = nullptr;
    weights_.reset();
    std::filesystem::remove_all(dir_);
  }

  static inline std::filesystem::path dir_;
  static inline std::shared_ptr<const ModelWeights> weights_;
  static inline TextSupport* text_ = nullptr;
};

}  // namespace sy::http
