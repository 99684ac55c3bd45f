// The engine's reference path against Hugging Face transformers on small random models of each
// architecture, in float32 and bfloat16 (files in tests/golden/data, made by
// tools/goldens/make_goldens.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/model_weights.h"
#include "engine/reference/reference_session.h"
#include "engine/util/npy.h"

namespace sy {
namespace {

const std::filesystem::path kData = std::filesystem::path(SY_SOURCE_DIR) / "tests/golden/data";

// Tolerances on the largest logit difference, relative to the spread (std) of the golden
// logits. f32: both sides compute in float32 and differ only by summation order. bf16:
// transformers rounds every activation to bfloat16 while the engine keeps float32
// activations over bf16 weights: at the worst logit of a prompt the two differ by 5-12 % of the
// logit scale on these models (tools/goldens picks prompts within 10 %), so 20 % here.
double tolerance(const std::string& dtype) { return dtype == "f32" ? 1e-4 : 0.2; }

// The greedy tokens of each bf16 model are checked twice: as the cpu backend computes (float32
// GEMM inputs) and as the cuda backend does (GEMM inputs rounded to bf16,
// GemmInputs::WeightType), which the GPU tests compare the GPU against. With f32 weights the
// two are the same computation. The logits are checked in the first mode only: rounding the
// GEMM inputs, but not every activation as transformers does, lands no closer to it (worst
// logit 4-16 % of the spread where float32 inputs give 3-10 %), and a router near-tie that the
// rounding flips moves one position by 45 % (olmoe-bf16, 17 tokens, position 9).
std::vector<kernels::GemmInputs> gemm_inputs(const std::string& dtype) {
  if (dtype == "f32") return {kernels::GemmInputs::Float32};
  return {kernels::GemmInputs::Float32, kernels::GemmInputs::WeightType};
}

const char* label(kernels::GemmInputs inputs) {
  return inputs == kernels::GemmInputs::Float32 ? "float32 GEMM inputs" : "GEMM inputs rounded to the weight type";
}

class Golden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = kData / GetParam();
    std::ifstream in(dir_ / "golden.json");
    ASSERT_TRUE(in) << "missing " << (dir_ / "golden.json");
    golden_ = nlohmann::json::parse(in);
    auto weights = ModelWeights::load(dir_);
    ASSERT_TRUE(weights.ok()) << weights.status().message();
    weights_ = *weights;
  }

  std::filesystem::path dir_;
  nlohmann::json golden_;
  std::shared_ptr<const ModelWeights> weights_;
};

TEST_P(Golden, LogitsMatchTransformers) {
  const std::string dtype = golden_["dtype"];
  for (const auto& prompt : golden_["prompts"]) {
    const std::vector<std::int32_t> tokens = prompt["tokens"];
    auto expected = read_npy(dir_ / prompt["logits"].get<std::string>());
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    const std::int64_t vocab = weights_->config().vocab_size;
    ASSERT_EQ(expected->shape, (std::vector<std::int64_t>{static_cast<std::int64_t>(tokens.size()), vocab}));

    ReferenceSession session(weights_, static_cast<std::int32_t>(tokens.size()));
    auto logits = session.forward(tokens, /*all_logits=*/true);
    ASSERT_TRUE(logits.ok()) << logits.status().message();
    ASSERT_EQ(logits->size(), expected->data.size());

    double mean = 0, var = 0, max_diff = 0;
    for (float x : expected->data) mean += x;
    mean /= static_cast<double>(expected->data.size());
    for (float x : expected->data) var += (x - mean) * (x - mean);
    const double scale = std::sqrt(var / static_cast<double>(expected->data.size()));
    std::size_t worst = 0;
    for (std::size_t i = 0; i < logits->size(); ++i) {
      const double d = std::fabs(static_cast<double>((*logits)[i]) - expected->data[i]);
      if (d > max_diff) max_diff = d, worst = i;
    }
    EXPECT_LE(max_diff / scale, tolerance(dtype))
        << GetParam() << " prompt of " << tokens.size() << " tokens: max |Δlogit| " << max_diff
        << " at position " << worst / vocab << ", token " << worst % vocab << " (logit std " << scale << ")";
    RecordProperty("max_rel_diff_" + std::to_string(tokens.size()), std::to_string(max_diff / scale));
  }
}

TEST_P(Golden, GreedyContinuationMatchesTransformers) {
  for (const auto& prompt : golden_["prompts"]) {
    const std::vector<std::int32_t> tokens = prompt["tokens"];
    const std::vector<std::int32_t> expected = prompt["greedy"];
    GenerateOptions options;
    options.max_new_tokens = static_cast<std::int32_t>(expected.size());
    for (const kernels::GemmInputs inputs : gemm_inputs(golden_["dtype"])) {
      ReferenceSession session(weights_, static_cast<std::int32_t>(tokens.size() + expected.size()), 16, inputs);
      auto out = generate(session, tokens, options);
      ASSERT_TRUE(out.ok()) << out.status().message();
      EXPECT_EQ(*out, expected) << GetParam() << " prompt of " << tokens.size() << " tokens, " << label(inputs);
    }
  }
}

// Prefill in one step and token-by-token decode over the paged cache give the same logits.
TEST_P(Golden, IncrementalDecodeMatchesPrefill) {
  const std::vector<std::int32_t> tokens = golden_["prompts"].back()["tokens"];
  ReferenceSession whole(weights_, static_cast<std::int32_t>(tokens.size()), /*page_size=*/4);
  auto all = whole.forward(tokens, /*all_logits=*/true);
  ASSERT_TRUE(all.ok());
  ReferenceSession step(weights_, static_cast<std::int32_t>(tokens.size()), /*page_size=*/4);
  const std::int64_t vocab = weights_->config().vocab_size;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    auto one = step.forward({&tokens[t], 1}, /*all_logits=*/false);
    ASSERT_TRUE(one.ok());
    for (std::int64_t v = 0; v < vocab; ++v) {
      ASSERT_NEAR((*one)[v], (*all)[t * vocab + v], 1e-3 * (1 + std::fabs((*all)[t * vocab + v])))
          << "position " << t << " token " << v;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllArchitectures, Golden,
                         ::testing::Values("mixtral-f32", "mixtral-bf16", "qwen2_moe-f32", "qwen2_moe-bf16",
                                           "qwen3_moe-f32", "qwen3_moe-bf16", "olmoe-f32", "olmoe-bf16",
                                           // qwen3_moe's weights under YaRN (rope_type yarn, factor 4)
                                           "qwen3_moe_yarn-f32"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace sy
