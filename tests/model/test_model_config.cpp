// config.json parsing per architecture (keys, Hugging Face defaults, sparse-layer rule), every
// rejection with its message, to_json round trips, presets and parameter counts.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/model_config.h"
#include "engine/model/random_model.h"
#include "tests/model/model_test_util.h"

namespace sy {
namespace {

using nlohmann::json;
using testing_util::FailsWith;

const std::string kSrc = "/models/m/config.json";

json mixtral_json() {
  return {{"model_type", "mixtral"},     {"vocab_size", 100},        {"hidden_size", 64},
          {"num_hidden_layers", 3},      {"num_attention_heads", 4}, {"intermediate_size", 96},
          {"num_local_experts", 4},      {"num_experts_per_tok", 2}};
}

json qwen2_json() {
  return {{"model_type", "qwen2_moe"},
          {"vocab_size", 100},
          {"hidden_size", 64},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"intermediate_size", 128},
          {"moe_intermediate_size", 32},
          {"shared_expert_intermediate_size", 48},
          {"num_experts", 6},
          {"num_experts_per_tok", 3}};
}

json qwen3_json() {
  return {{"model_type", "qwen3_moe"}, {"vocab_size", 100},          {"hidden_size", 64},
          {"num_hidden_layers", 2},    {"num_attention_heads", 4},   {"num_key_value_heads", 1},
          {"head_dim", 32},            {"moe_intermediate_size", 32}, {"num_experts", 8},
          {"num_experts_per_tok", 2}};
}

StatusOr<ModelConfig> parse(const json& j) { return ModelConfig::from_json(j.dump(), kSrc); }

TEST(ModelConfig, MixtralDefaults) {
  auto c = parse(mixtral_json());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, Arch::Mixtral);
  EXPECT_EQ(c->vocab_size, 100);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->num_layers, 3);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 4);   // default: num_attention_heads
  EXPECT_EQ(c->head_dim, 16);      // default: hidden_size / num_attention_heads
  EXPECT_EQ(c->intermediate_size, 96);
  EXPECT_EQ(c->moe_intermediate_size, 96);  // Mixtral experts use intermediate_size
  EXPECT_EQ(c->num_experts, 4);
  EXPECT_EQ(c->top_k, 2);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_FALSE(c->has_shared_expert());
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e6);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->max_position_embeddings, 131072);
  EXPECT_EQ(c->dtype, kernels::DType::F32);
  EXPECT_FALSE(c->eos_token_id.has_value());
  EXPECT_EQ(c->sparse_layers, (std::vector<bool>{true, true, true}));
}

TEST(ModelConfig, MixtralIgnoresQwenSparsityKeysAndNormTopk) {
  json j = mixtral_json();
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {0};
  j["norm_topk_prob"] = false;
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->sparse_layers, (std::vector<bool>{true, true, true}));
  EXPECT_TRUE(c->norm_topk_prob);
}

TEST(ModelConfig, Qwen2MoeDefaultsAndSparseRule) {
  auto c = parse(qwen2_json());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, Arch::Qwen2Moe);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->moe_intermediate_size, 32);
  EXPECT_EQ(c->shared_expert_intermediate_size, 48);
  EXPECT_TRUE(c->has_shared_expert());
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_FALSE(c->norm_topk_prob);  // Qwen2MoeConfig default
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e4);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_EQ(c->max_position_embeddings, 32768);
  EXPECT_EQ(c->sparse_layers, (std::vector<bool>{true, true, true, true}));

  json j = qwen2_json();
  j["decoder_sparse_step"] = 2;  // (i + 1) % 2 == 0: layers 1 and 3
  j["mlp_only_layers"] = {3, 17};
  j["norm_topk_prob"] = true;
  j["qkv_bias"] = false;
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->sparse_layers, (std::vector<bool>{false, true, false, false}));
  EXPECT_TRUE(c->is_sparse(1));
  EXPECT_FALSE(c->is_sparse(3));
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_FALSE(c->qkv_bias);
}

TEST(ModelConfig, Qwen3MoeDefaultsAndHeadDim) {
  auto c = parse(qwen3_json());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, Arch::Qwen3Moe);
  EXPECT_EQ(c->head_dim, 32);  // explicit, not hidden_size / heads (16)
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_FALSE(c->has_shared_expert());
  EXPECT_FALSE(c->norm_topk_prob);  // Qwen3MoeConfig default
  EXPECT_EQ(c->intermediate_size, 0);  // no dense layer, so not needed
  EXPECT_EQ(c->sparse_layers, (std::vector<bool>{true, true}));

  json j = qwen3_json();
  j["head_dim"] = nullptr;
  j["norm_topk_prob"] = true;
  j["tie_word_embeddings"] = true;
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_TRUE(c->tie_word_embeddings);

  // A dense layer needs intermediate_size.
  j["mlp_only_layers"] = {1};
  EXPECT_TRUE(FailsWith(parse(j), {"intermediate_size", kSrc}));
  j["intermediate_size"] = 80;
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->sparse_layers, (std::vector<bool>{true, false}));
  EXPECT_EQ(c->intermediate_size, 80);
}

TEST(ModelConfig, OptionalKeys) {
  json j = mixtral_json();
  j["torch_dtype"] = "float16";
  j["rope_theta"] = 5e5;
  j["rms_norm_eps"] = 1e-6;
  j["max_position_embeddings"] = 2048;
  j["tie_word_embeddings"] = true;
  j["eos_token_id"] = {7, 9};
  j["sliding_window"] = nullptr;
  j["rope_scaling"] = nullptr;
  j["hidden_act"] = "silu";
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->dtype, kernels::DType::F16);
  EXPECT_DOUBLE_EQ(c->rope_theta, 5e5);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_EQ(c->max_position_embeddings, 2048);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->eos_token_id, 7);

  j["dtype"] = "bfloat16";  // transformers 5 key wins over torch_dtype
  j["eos_token_id"] = 3;
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->dtype, kernels::DType::BF16);
  EXPECT_EQ(c->eos_token_id, 3);

  // transformers 5 style rope_parameters; plain rope_scaling of the default type.
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 2e4}};
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_DOUBLE_EQ(c->rope_theta, 2e4);
  j.erase("rope_parameters");
  j["rope_scaling"] = {{"type", "default"}};
  EXPECT_TRUE(parse(j).ok());

  // Windows that never bite are accepted.
  j["sliding_window"] = 2048;
  EXPECT_TRUE(parse(j).ok());
  json q = qwen2_json();
  q["use_sliding_window"] = false;
  q["sliding_window"] = 4096;
  q["max_position_embeddings"] = 32768;
  EXPECT_TRUE(parse(q).ok());

  // The alias transformers' attribute_map allows.
  json a = qwen3_json();
  a.erase("num_experts");
  a["num_local_experts"] = 8;
  c = parse(a);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->num_experts, 8);
}

TEST(ModelConfig, RejectsUnsupportedModelType) {
  json j = mixtral_json();
  j["model_type"] = "llama";
  EXPECT_TRUE(FailsWith(parse(j), {"unsupported model_type 'llama'", kSrc, "mixtral, qwen2_moe, qwen3_moe"}));
  EXPECT_TRUE(FailsWith(parse_arch("gpt2"), {"gpt2"}));
  EXPECT_EQ(*parse_arch("qwen3_moe"), Arch::Qwen3Moe);
  EXPECT_EQ(arch_name(Arch::Qwen2Moe), "qwen2_moe");
}

TEST(ModelConfig, RejectsMissingKeys) {
  for (const char* key : {"model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                          "intermediate_size", "num_local_experts", "num_experts_per_tok"}) {
    json j = mixtral_json();
    j.erase(key);
    EXPECT_TRUE(FailsWith(parse(j), {"missing required key '" + std::string(key) + "'", kSrc})) << key;
  }
  for (const char* key : {"moe_intermediate_size", "shared_expert_intermediate_size", "num_experts"}) {
    json j = qwen2_json();
    j.erase(key);
    EXPECT_TRUE(FailsWith(parse(j), {"missing required key '" + std::string(key) + "'", kSrc})) << key;
  }
  json j = mixtral_json();
  j["hidden_size"] = nullptr;
  EXPECT_TRUE(FailsWith(parse(j), {"missing required key 'hidden_size'"}));
}

TEST(ModelConfig, RejectsBadValues) {
  struct Case {
    const char* key;
    json value;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"hidden_size", 0, "'hidden_size'"},
      {"vocab_size", -5, "'vocab_size'"},
      {"num_hidden_layers", "4", "'num_hidden_layers'"},
      {"intermediate_size", 9.5, "'intermediate_size'"},
      {"num_key_value_heads", 0, "'num_key_value_heads'"},
      {"head_dim", 0, "'head_dim'"},
      {"head_dim", 15, "head_dim (15)"},
      {"num_experts_per_tok", 0, "'num_experts_per_tok'"},
      {"rms_norm_eps", 0, "'rms_norm_eps'"},
      {"rms_norm_eps", 1e-69, "within a float's range"},  // found by fuzz_model_config: 0 as a float
      {"rms_norm_eps", 1e300, "within a float's range"},
      {"rope_theta", -1.0, "rope_theta"},
      {"tie_word_embeddings", "yes", "'tie_word_embeddings'"},
      {"torch_dtype", "int8", "'torch_dtype'"},
      {"hidden_act", "gelu", "'hidden_act'"},
      {"eos_token_id", 100, "'eos_token_id'"},
      {"hidden_size", 1ll << 40, "out of range"},
  };
  for (const Case& k : cases) {
    json j = mixtral_json();
    j[k.key] = k.value;
    EXPECT_TRUE(FailsWith(parse(j), {k.expect, kSrc})) << k.key << " = " << k.value.dump();
  }
}

// Sizes beyond any real model are refused naming the key and the bound; before, a config.json
// with 2^31 - 1 layers or experts ended the sim in std::bad_alloc.
TEST(ModelConfig, RejectsSizesBeyondTheBounds) {
  struct Case {
    std::function<json()> base;
    const char* key;
    std::int64_t value;
    std::int32_t bound;
  };
  const std::vector<Case> cases = {
      {mixtral_json, "num_hidden_layers", 2147483647, ModelConfig::kMaxLayers},
      {mixtral_json, "num_local_experts", 2147483647, ModelConfig::kMaxExperts},
      {qwen2_json, "num_experts", ModelConfig::kMaxExperts + 1, ModelConfig::kMaxExperts},
      {mixtral_json, "vocab_size", ModelConfig::kMaxVocab + 1, ModelConfig::kMaxVocab},
      {mixtral_json, "hidden_size", ModelConfig::kMaxHidden + 4, ModelConfig::kMaxHidden},
      {mixtral_json, "intermediate_size", ModelConfig::kMaxIntermediate + 1, ModelConfig::kMaxIntermediate},
      {qwen2_json, "moe_intermediate_size", ModelConfig::kMaxIntermediate + 1, ModelConfig::kMaxIntermediate},
      {qwen2_json, "shared_expert_intermediate_size", ModelConfig::kMaxIntermediate + 1, ModelConfig::kMaxIntermediate},
      {mixtral_json, "num_attention_heads", 2048, ModelConfig::kMaxHeads},
      {mixtral_json, "head_dim", 2147483646, ModelConfig::kMaxHeadDim},
  };
  for (const Case& k : cases) {
    json j = k.base();
    j[k.key] = k.value;
    if (std::string(k.key) == "num_attention_heads") j["hidden_size"] = 4096;
    EXPECT_TRUE(FailsWith(parse(j), {"'" + std::string(k.key) + "'", "at most " + std::to_string(k.bound),
                                     std::to_string(k.value), kSrc}))
        << k.key;
    // The bound itself is a model we read.
    j[k.key] = k.bound;
    if (std::string(k.key) == "hidden_size") j["num_attention_heads"] = 128;
    if (std::string(k.key) == "num_attention_heads") j["hidden_size"] = 65536;
    EXPECT_TRUE(parse(j).ok()) << k.key << ": " << parse(j).status().message();
  }
  // A head size not given is bounded too: hidden_size / num_attention_heads.
  json j = mixtral_json();
  j["hidden_size"] = 65536;
  j["num_attention_heads"] = 8;
  EXPECT_TRUE(FailsWith(parse(j), {"head_dim is not given", "8192", "1024", kSrc}));
  // DBRX's own keys.
  const json dbrx = {{"model_type", "dbrx"},
                     {"vocab_size", 100},
                     {"d_model", 64},
                     {"n_layers", 2147483647},
                     {"n_heads", 4},
                     {"attn_config", {{"kv_n_heads", 2}}},
                     {"ffn_config", {{"ffn_hidden_size", 96}, {"moe_num_experts", 4}, {"moe_top_k", 2}}}};
  EXPECT_TRUE(FailsWith(parse(dbrx), {"'n_layers'", "at most 1024", kSrc}));
  json experts = dbrx;
  experts["n_layers"] = 2;
  experts["ffn_config"]["moe_num_experts"] = 2147483647;
  EXPECT_TRUE(FailsWith(parse(experts), {"'moe_num_experts'", "at most 4096"}));
}

TEST(ModelConfig, RejectsInconsistentHeadsAndExperts) {
  json j = mixtral_json();
  j["num_key_value_heads"] = 3;
  EXPECT_TRUE(FailsWith(parse(j), {"num_attention_heads (4) is not divisible by num_key_value_heads (3)", kSrc}));
  j = mixtral_json();
  j["num_experts_per_tok"] = 5;
  EXPECT_TRUE(FailsWith(parse(j), {"num_experts_per_tok (5) exceeds num_local_experts (4)", kSrc}));
  j = qwen2_json();
  j["decoder_sparse_step"] = 0;
  EXPECT_TRUE(FailsWith(parse(j), {"'decoder_sparse_step'", kSrc}));
  j = qwen2_json();
  j["mlp_only_layers"] = "0";
  EXPECT_TRUE(FailsWith(parse(j), {"'mlp_only_layers'", kSrc}));
  j = qwen3_json();
  j["attention_bias"] = true;
  EXPECT_TRUE(FailsWith(parse(j), {"'attention_bias'", kSrc}));
}

json olmoe_json() {
  return {{"model_type", "olmoe"},         {"vocab_size", 100},        {"hidden_size", 64},
          {"num_hidden_layers", 3},        {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"intermediate_size", 48},       {"num_experts", 6},         {"num_experts_per_tok", 2},
          {"clip_qkv", nullptr}};
}

// OlmoeConfig: every layer routed, experts of width intermediate_size, q/k RMSNorm over each
// whole projection, top-k weights as the softmax gave them unless norm_topk_prob.
TEST(ModelConfig, OlmoeDefaultsAndRefusals) {
  auto c = parse(olmoe_json());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, Arch::Olmoe);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qk_norm_per_head);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_FALSE(c->has_shared_expert());
  EXPECT_FALSE(c->norm_topk_prob);
  EXPECT_EQ(c->moe_intermediate_size, 48);
  EXPECT_EQ(c->sparse_layers, (std::vector<bool>{true, true, true}));
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_EQ(c->rope_theta, 1e4);
  EXPECT_EQ(c->max_position_embeddings, 4096);
  // q_norm spans the whole q projection and k_norm the whole k projection.
  const std::int64_t per_layer_norms = 64 + 2 * 16;
  EXPECT_EQ(c->parameter_count(),
            2 * 100 * 64 + 64 + 3 * (2 * 64 + 64 * 64 + 2 * 64 * 32 + 64 * 64 + per_layer_norms + 6 * 64 + 6 * 3 * 64 * 48));

  // Qwen's sparsity keys do not apply: OLMoE routes every layer.
  json j = olmoe_json();
  j["mlp_only_layers"] = {1};
  j["decoder_sparse_step"] = 2;
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->sparse_layers, (std::vector<bool>{true, true, true}));

  j = olmoe_json();
  j["clip_qkv"] = 8.0;
  EXPECT_TRUE(FailsWith(parse(j), {"clip_qkv", "not supported", kSrc}));
  j = olmoe_json();
  j["attention_bias"] = true;
  EXPECT_TRUE(FailsWith(parse(j), {"attention_bias", "olmoe", kSrc}));
  j = olmoe_json();
  j["head_dim"] = 32;
  EXPECT_TRUE(FailsWith(parse(j), {"head_dim (32)", "hidden_size (64)", "q_norm", kSrc}));
  // head_dim × heads must not wrap: 1073741856 × 4 is 2^32 + 128, 128 in 32 bits.
  j = olmoe_json();
  j["hidden_size"] = 128;
  j["num_attention_heads"] = 4;
  j["num_key_value_heads"] = 4;
  j["head_dim"] = 1073741856;
  EXPECT_TRUE(FailsWith(parse(j), {"head_dim", "1073741856", kSrc}));
  j = olmoe_json();
  j.erase("intermediate_size");
  EXPECT_TRUE(FailsWith(parse(j), {"missing required key 'intermediate_size'", kSrc}));
}

TEST(ModelConfig, RejectsSlidingWindow) {
  // RoPE variants: test_rope_scaling.cpp.
  json j = mixtral_json();
  j["max_position_embeddings"] = 32768;
  j["sliding_window"] = 4096;
  EXPECT_TRUE(FailsWith(parse(j), {"sliding_window 4096", "not implemented", kSrc}));
  j = qwen2_json();
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  EXPECT_TRUE(FailsWith(parse(j), {"sliding_window 4096", "use_sliding_window", kSrc}));
}

TEST(ModelConfig, RejectsNonJson) {
  EXPECT_TRUE(FailsWith(ModelConfig::from_json("{\"model_type\": ", kSrc), {kSrc, "not valid JSON"}));
  // A number beyond a double's range used to escape as an "internal error" naming no file.
  EXPECT_TRUE(FailsWith(ModelConfig::from_json(R"({"model_type": "mixtral", "rms_norm_eps": 1e400})", kSrc),
                        {kSrc, "not valid JSON", "range of a double"}));
  EXPECT_TRUE(FailsWith(ModelConfig::from_json("[1, 2]", kSrc), {kSrc, "object"}));
}

TEST(ModelConfig, FromFile) {
  testing_util::TempDir dir;
  EXPECT_TRUE(FailsWith(ModelConfig::from_file(dir / "config.json"), {(dir / "config.json").string()}));
  testing_util::write_file(dir / "config.json", qwen2_json().dump());
  auto c = ModelConfig::from_file(dir / "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->arch, Arch::Qwen2Moe);
  testing_util::write_file(dir / "config.json", "{}");
  EXPECT_TRUE(FailsWith(ModelConfig::from_file(dir / "config.json"),
                        {"missing required key 'model_type'", (dir / "config.json").string()}));
}

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.shared_expert_intermediate_size, b.shared_expert_intermediate_size);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.qk_norm_per_head, b.qk_norm_per_head);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling, b.rope_scaling);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.sparse_layers, b.sparse_layers);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.eos_token_id, b.eos_token_id);
}

TEST(ModelConfig, ToJsonRoundTripsEveryPreset) {
  for (Arch arch : {Arch::Mixtral, Arch::Qwen2Moe, Arch::Qwen3Moe, Arch::Olmoe}) {
    for (ModelPreset preset : {ModelPreset::Tiny, ModelPreset::Small}) {
      for (kernels::DType dtype : {kernels::DType::BF16, kernels::DType::F32}) {
        const ModelConfig c = preset_config(arch, preset, dtype);
        const std::string text = c.to_json();
        auto back = ModelConfig::from_json(text, "written");
        ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
        SCOPED_TRACE(text);
        expect_same(c, *back);

        const json j = json::parse(text);
        EXPECT_EQ(j["model_type"], arch_name(arch));
        EXPECT_EQ(j["architectures"].size(), 1u);
        EXPECT_EQ(j["hidden_act"], "silu");
        EXPECT_EQ(j["dtype"], dtype == kernels::DType::BF16 ? "bfloat16" : "float32");
        EXPECT_EQ(j["torch_dtype"], j["dtype"]);
        EXPECT_TRUE(j["rope_scaling"].is_null());
        EXPECT_EQ(j["attention_dropout"], 0.0);
      }
    }
  }
  const json m = json::parse(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::BF16).to_json());
  EXPECT_EQ(m["architectures"][0], "MixtralForCausalLM");
  EXPECT_EQ(m["rms_norm_eps"].dump(), "1e-05");  // the float written as a person would
  EXPECT_TRUE(m.contains("num_local_experts"));
  const json q3 = json::parse(preset_config(Arch::Qwen3Moe, ModelPreset::Tiny, kernels::DType::BF16).to_json());
  EXPECT_EQ(q3["architectures"][0], "Qwen3MoeForCausalLM");
  EXPECT_EQ(q3["decoder_sparse_step"], 2);
  EXPECT_EQ(q3["mlp_only_layers"], json::array());
  const json q2 = json::parse(preset_config(Arch::Qwen2Moe, ModelPreset::Tiny, kernels::DType::BF16).to_json());
  EXPECT_EQ(q2["architectures"][0], "Qwen2MoeForCausalLM");
  EXPECT_EQ(q2["decoder_sparse_step"], 1);
  EXPECT_EQ(q2["mlp_only_layers"], json::array({0}));
}

// Found by fuzz_model_config: a Qwen MoE config with no dense block may omit
// intermediate_size, and the config.json written for it must read back.
TEST(ModelConfig, ToJsonRoundTripsWithoutIntermediateSize) {
  auto c = parse(qwen3_json());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->intermediate_size, 0);
  const std::string text = c->to_json();
  auto back = ModelConfig::from_json(text, "written");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  expect_same(*c, *back);
  EXPECT_FALSE(json::parse(text).contains("intermediate_size"));
}

TEST(ModelConfig, PresetsExerciseEveryArchitecturePath) {
  for (ModelPreset preset : {ModelPreset::Tiny, ModelPreset::Small}) {
    const ModelConfig m = preset_config(Arch::Mixtral, preset, kernels::DType::BF16);
    for (std::int32_t i = 0; i < m.num_layers; ++i) EXPECT_TRUE(m.is_sparse(i));
    EXPECT_TRUE(m.norm_topk_prob);

    const ModelConfig q2 = preset_config(Arch::Qwen2Moe, preset, kernels::DType::BF16);
    EXPECT_TRUE(q2.has_shared_expert());
    EXPECT_TRUE(q2.qkv_bias);
    EXPECT_FALSE(q2.is_sparse(0));
    EXPECT_TRUE(q2.is_sparse(1));

    const ModelConfig q3 = preset_config(Arch::Qwen3Moe, preset, kernels::DType::BF16);
    EXPECT_TRUE(q3.qk_norm);
    EXPECT_FALSE(q3.is_sparse(0));
    EXPECT_TRUE(q3.is_sparse(1));
    EXPECT_EQ(q3.tie_word_embeddings, preset == ModelPreset::Tiny);

    const ModelConfig o = preset_config(Arch::Olmoe, preset, kernels::DType::BF16);
    EXPECT_TRUE(o.qk_norm);
    EXPECT_FALSE(o.qk_norm_per_head);
    EXPECT_EQ(o.head_dim * o.num_heads, o.hidden_size);
    for (std::int32_t i = 0; i < o.num_layers; ++i) EXPECT_TRUE(o.is_sparse(i));
    EXPECT_FALSE(o.norm_topk_prob);
  }
  EXPECT_EQ(*parse_preset("tiny"), ModelPreset::Tiny);
  EXPECT_EQ(*parse_preset("small"), ModelPreset::Small);
  EXPECT_TRUE(FailsWith(parse_preset("huge"), {"huge"}));
}

TEST(ModelConfig, ParameterCount) {
  // Mixtral tiny by hand: V=512, H=128, 4 layers, q 4x32, kv 2x32, 8 experts of width 128.
  const ModelConfig m = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::BF16);
  const std::int64_t attn = 128 * 128 + 2 * 64 * 128 + 128 * 128;
  const std::int64_t layer = 2 * 128 + attn + 8 * 128 + 8 * 3 * 128 * 128;
  EXPECT_EQ(m.parameter_count(), 2 * 512 * 128 + 128 + 4 * layer);

  // Qwen2 tiny: one dense layer (3·H·256), three sparse with shared expert (3·H·256 + H gate), biases.
  const ModelConfig q2 = preset_config(Arch::Qwen2Moe, ModelPreset::Tiny, kernels::DType::BF16);
  const std::int64_t q2_common = 2 * 128 + attn + (128 + 2 * 64);
  const std::int64_t q2_dense = q2_common + 3 * 128 * 256;
  const std::int64_t q2_sparse = q2_common + 8 * 128 + 8 * 3 * 128 * 128 + 3 * 128 * 256 + 128;
  EXPECT_EQ(q2.parameter_count(), 2 * 512 * 128 + 128 + q2_dense + 3 * q2_sparse);

  // Qwen3 tiny: tied embeddings, qk-norm, two dense and two sparse layers.
  const ModelConfig q3 = preset_config(Arch::Qwen3Moe, ModelPreset::Tiny, kernels::DType::BF16);
  const std::int64_t q3_common = 2 * 128 + attn + 2 * 32;
  EXPECT_EQ(q3.parameter_count(),
            512 * 128 + 128 + 2 * (q3_common + 3 * 128 * 256) + 2 * (q3_common + 8 * 128 + 8 * 3 * 128 * 128));

  for (Arch arch : {Arch::Mixtral, Arch::Qwen2Moe, Arch::Qwen3Moe}) {
    const auto tiny = preset_config(arch, ModelPreset::Tiny, kernels::DType::BF16).parameter_count();
    EXPECT_GT(tiny, 500'000) << arch_name(arch);
    EXPECT_LT(tiny, 4'000'000) << arch_name(arch);  // a few MB in bf16
    const auto small = preset_config(arch, ModelPreset::Small, kernels::DType::BF16).parameter_count();
    EXPECT_GE(small, 300'000'000) << arch_name(arch);
    EXPECT_LE(small, 700'000'000) << arch_name(arch);
  }
}

}  // namespace
}  // namespace sy
