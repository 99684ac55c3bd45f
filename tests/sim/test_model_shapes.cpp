// The weight-free model shapes of assets/models/: each loads through ModelConfig::from_file with
// its published size, and DBRX (read in its own config format) is a shape only: its weights are
// neither loaded nor written.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/model/random_model.h"
#include "engine/sim/hardware_profile.h"
#include "tests/model/model_test_util.h"

namespace sy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_util::FailsWith;
using testing_util::read_file;
using testing_util::TempDir;
using testing_util::write_file;

fs::path shape_path(const std::string& name) { return assets_dir() / "models" / name / "config.json"; }

ModelConfig shape(const std::string& name) {
  auto c = ModelConfig::from_file(shape_path(name));
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : ModelConfig{};
}

double billions(std::int64_t n) { return static_cast<double>(n) / 1e9; }

TEST(ModelShapes, EveryShippedShapeLoads) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(assets_dir() / "models")) {
    if (!e.is_directory()) continue;
    ++n;
    auto c = ModelConfig::from_file(e.path() / "config.json");
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_GT(c->parameter_count(), c->active_parameter_count()) << e.path();
  }
  EXPECT_EQ(n, 8);
}

// Published totals and active counts: the model cards (Mixtral 46.7B / 12.9B, 141B / 39B; DBRX
// 132B / 36B; Qwen3 235B / 22B; Qwen1.5-MoE 14.3B / 2.7B; OLMoE 6.9B / 1.3B) and MegaScale-Infer §7.1 (Scaled-MoE 317B, no active count).
TEST(ModelShapes, ParameterCountsMatchThePublishedSizes) {
  struct Published {
    const char* name;
    double total_b;
    double active_b;  // 0: not published
  };
  const Published models[] = {{"mixtral-8x7b", 46.7, 12.9}, {"mixtral-8x22b", 141, 39}, {"dbrx", 132, 36},
                              {"qwen3-235b-a22b", 235, 22}, {"scaled-moe", 317, 0},
                              {"qwen1.5-moe-a2.7b", 14.3, 2.7}, {"olmoe-1b-7b", 6.9, 1.3}};
  for (const Published& m : models) {
    const ModelConfig c = shape(m.name);
    EXPECT_NEAR(billions(c.parameter_count()), m.total_b, m.total_b * 0.02) << m.name;
    if (m.active_b > 0) {
      EXPECT_NEAR(billions(c.active_parameter_count()), m.active_b, m.active_b * 0.02) << m.name;
    }
  }
}

// MegaScale-Infer Table 4: layers, hidden size, experts, top-k, intermediate size.
TEST(ModelShapes, MegaScaleInferModelsMatchTable4) {
  struct Row {
    const char* name;
    int layers, hidden, experts, top_k, intermediate;
  };
  const Row rows[] = {{"mixtral-8x22b", 56, 6144, 8, 2, 16384},
                      {"dbrx", 40, 6144, 16, 4, 10752},
                      {"scaled-moe", 48, 8192, 32, 4, 8192}};
  for (const Row& r : rows) {
    const ModelConfig c = shape(r.name);
    EXPECT_EQ(c.num_layers, r.layers) << r.name;
    EXPECT_EQ(c.hidden_size, r.hidden) << r.name;
    EXPECT_EQ(c.num_experts, r.experts) << r.name;
    EXPECT_EQ(c.top_k, r.top_k) << r.name;
    EXPECT_EQ(c.moe_intermediate_size, r.intermediate) << r.name;
  }
}

// AMoE §5.2: Mixtral-8x7B with 16 experts and top-1 routing, everything else unchanged.
TEST(ModelShapes, AmoeVariantIsMixtral8x7bWith16ExpertsTop1) {
  const ModelConfig base = shape("mixtral-8x7b");
  ModelConfig v = shape("mixtral-8x7b-16e-top1");
  EXPECT_EQ(v.num_experts, 16);
  EXPECT_EQ(v.top_k, 1);
  v.num_experts = base.num_experts;
  v.top_k = base.top_k;
  EXPECT_EQ(v.to_json(), base.to_json());
}

TEST(ModelShapes, DbrxIsReadFromItsOwnFormat) {
  const ModelConfig c = shape("dbrx");
  EXPECT_EQ(c.arch, Arch::Dbrx);
  EXPECT_TRUE(c.shapes_only());
  EXPECT_EQ(c.hidden_size, 6144);
  EXPECT_EQ(c.num_layers, 40);
  EXPECT_EQ(c.num_heads, 48);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.intermediate_size, 10752);
  EXPECT_EQ(c.moe_intermediate_size, 10752);
  EXPECT_EQ(c.num_experts, 16);
  EXPECT_EQ(c.top_k, 4);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.vocab_size, 100352);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, kernels::DType::BF16);
  for (std::int32_t i = 0; i < c.num_layers; ++i) EXPECT_TRUE(c.is_sparse(i));

  // to_json writes DBRX's format, which reads back as the same shape.
  const json written = json::parse(c.to_json());
  EXPECT_EQ(written["model_type"], "dbrx");
  EXPECT_EQ(written["ffn_config"]["moe_num_experts"], 16);
  auto back = ModelConfig::from_json(c.to_json(), "written");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->to_json(), c.to_json());
  EXPECT_EQ(back->parameter_count(), c.parameter_count());
  EXPECT_EQ(back->head_dim, c.head_dim);
  EXPECT_EQ(back->rms_norm_eps, c.rms_norm_eps);
  EXPECT_EQ(back->sparse_layers, c.sparse_layers);
}

TEST(ModelShapes, DbrxConfigErrorsNameTheFileAndTheKey) {
  const json good = json::parse(read_file(shape_path("dbrx")));
  ASSERT_TRUE(ModelConfig::from_json(good.dump(), "d.json").ok());
  auto fails = [&](json j, std::initializer_list<std::string> parts) {
    return FailsWith(ModelConfig::from_json(j.dump(), "d.json"), parts);
  };
  json j = good;
  j.erase("attn_config");
  EXPECT_TRUE(fails(j, {"missing required key 'attn_config' in d.json"}));
  j = good;
  j["ffn_config"] = 3;
  EXPECT_TRUE(fails(j, {"key 'ffn_config' in d.json must be an object"}));
  j = good;
  j["attn_config"].erase("kv_n_heads");
  EXPECT_TRUE(fails(j, {"missing required key 'kv_n_heads' in attn_config of d.json"}));
  j = good;
  j.erase("d_model");
  EXPECT_TRUE(fails(j, {"missing required key 'd_model' in d.json"}));
  j = good;
  j["ffn_config"]["moe_top_k"] = 17;
  EXPECT_TRUE(fails(j, {"moe_top_k (17) exceeds moe_num_experts (16) in ffn_config of d.json"}));
  j = good;
  j["ffn_config"]["ffn_act_fn"] = {{"name", "gelu"}};
  EXPECT_TRUE(fails(j, {"'ffn_act_fn' in ffn_config of d.json is not supported"}));
  j = good;
  j["ffn_config"]["moe_normalize_expert_weights"] = 2;
  EXPECT_TRUE(fails(j, {"'moe_normalize_expert_weights' in ffn_config of d.json is not supported"}));
  j = good;
  j["attn_config"]["kv_n_heads"] = 5;
  EXPECT_TRUE(fails(j, {"n_heads (48) is not divisible by kv_n_heads (5) in d.json"}));
  j = good;
  j["tie_word_embeddings"] = true;
  EXPECT_TRUE(fails(j, {"'tie_word_embeddings' in d.json must be false"}));
  j = good;
  j["ffn_config"]["moe_normalize_expert_weights"] = nullptr;
  auto unnormalised = ModelConfig::from_json(j.dump(), "d.json");
  ASSERT_TRUE(unnormalised.ok()) << unnormalised.status().message();
  EXPECT_FALSE(unnormalised->norm_topk_prob);
}

TEST(ModelShapes, DbrxWeightsAreNeitherLoadedNorWritten) {
  auto w = ModelWeights::load(shape_path("dbrx").parent_path());
  EXPECT_TRUE(FailsWith(w, {"dbrx: shapes only (simulator); weight loading is not supported",
                            shape_path("dbrx").string()}));

  // Even with a checkpoint beside it, the refusal comes first.
  TempDir dir;
  write_file(dir / "config.json", read_file(shape_path("dbrx")));
  write_file(dir / "model.safetensors", "not a checkpoint");
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir.path()), {"dbrx: shapes only (simulator)"}));

  const fs::path out = dir / "random";
  EXPECT_TRUE(FailsWith(write_random_model(shape("dbrx"), 1, out), {"dbrx: shapes only (simulator)"}));
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace sy
