// config.json parsing and writing with the semantics (key names, defaults, sparse-layer rule) of
// the Hugging Face transformers configuration classes MixtralConfig, Qwen2MoeConfig,
// Qwen3MoeConfig and (shapes only) DbrxConfig. docs/model-format.md lists every key read and its
// default.
#include "engine/model/model_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_parse.h"

namespace sy {

using nlohmann::json;

std::string arch_name(Arch arch) {
  switch (arch) {
    case Arch::Mixtral: return "mixtral";
    case Arch::Qwen2Moe: return "qwen2_moe";
    case Arch::Qwen3Moe: return "qwen3_moe";
    case Arch::Olmoe: return "olmoe";
    case Arch::Dbrx: return "dbrx";
  }
  return "unknown";
}

StatusOr<Arch> parse_arch(const std::string& model_type) {
  if (model_type == "mixtral") return Arch::Mixtral;
  if (model_type == "qwen2_moe") return Arch::Qwen2Moe;
  if (model_type == "qwen3_moe") return Arch::Qwen3Moe;
  if (model_type == "olmoe") return Arch::Olmoe;
  if (model_type == "dbrx") return Arch::Dbrx;
  return Status::Error("unsupported model_type '" + model_type +
                       "' (supported: mixtral, qwen2_moe, qwen3_moe, olmoe; dbrx as a simulator shape only)");
}

bool arch_is_shapes_only(Arch arch) { return arch == Arch::Dbrx; }

namespace {

std::string architecture_class(Arch arch) {
  switch (arch) {
    case Arch::Mixtral: return "MixtralForCausalLM";
    case Arch::Qwen2Moe: return "Qwen2MoeForCausalLM";
    case Arch::Qwen3Moe: return "Qwen3MoeForCausalLM";
    case Arch::Olmoe: return "OlmoeForCausalLM";
    case Arch::Dbrx: return "DbrxForCausalLM";
  }
  return "";
}

// The double whose decimal form is the shortest that reads back as `f` (1e-5f -> 1e-05, not
// 9.99999974737875e-06), so config.json carries the value a person would have written.
double shortest_double(float f) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, f);
  return std::strtod(std::string(buf, res.ptr).c_str(), nullptr);
}

std::string torch_dtype_name(kernels::DType t) {
  switch (t) {
    case kernels::DType::F32: return "float32";
    case kernels::DType::F16: return "float16";
    case kernels::DType::BF16: return "bfloat16";
  }
  return "float32";
}

// DBRX's own config.json format, the one read_dbrx() reads.
std::string dbrx_json(const ModelConfig& c) {
  nlohmann::ordered_json attn;
  attn["clip_qkv"] = nullptr;
  attn["kv_n_heads"] = c.num_kv_heads;
  attn["rope_theta"] = c.rope_theta;
  nlohmann::ordered_json act;
  act["name"] = "silu";
  nlohmann::ordered_json ffn;
  ffn["ffn_act_fn"] = act;
  ffn["ffn_hidden_size"] = c.moe_intermediate_size;
  ffn["moe_num_experts"] = c.num_experts;
  ffn["moe_top_k"] = c.top_k;
  if (c.norm_topk_prob) ffn["moe_normalize_expert_weights"] = 1;
  else ffn["moe_normalize_expert_weights"] = nullptr;
  nlohmann::ordered_json j;
  j["architectures"] = {architecture_class(c.arch)};
  j["model_type"] = arch_name(c.arch);
  j["d_model"] = c.hidden_size;
  j["n_heads"] = c.num_heads;
  j["n_layers"] = c.num_layers;
  j["max_seq_len"] = c.max_position_embeddings;
  j["vocab_size"] = c.vocab_size;
  j["attn_config"] = attn;
  j["ffn_config"] = ffn;
  j["tie_word_embeddings"] = false;
  if (c.eos_token_id) j["eos_token_id"] = *c.eos_token_id;
  j["torch_dtype"] = torch_dtype_name(c.dtype);
  return j.dump(2) + "\n";
}

// Reads typed keys of one config.json object; every error names the key and the file.
class Reader {
 public:
  Reader(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  // A key that is absent or null counts as not given.
  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  // For the few keys where an explicit null means something other than the default.
  bool contains(const char* key) const { return j_.contains(key); }
  const json& at(const char* key) const { return j_.at(key); }

  Status missing(const char* key) const {
    return Status::Error("missing required key '" + std::string(key) + "' in " + source_);
  }
  Status bad(const char* key, const std::string& problem) const {
    return Status::Error("key '" + std::string(key) + "' in " + source_ + " " + problem + ", got " +
                         j_.at(key).dump());
  }

  StatusOr<std::int32_t> int32(const char* key) const {
    if (!has(key)) return missing(key);
    const json& v = j_.at(key);
    if (!v.is_number_integer()) return bad(key, "must be an integer");
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max()))
        return bad(key, "is out of range");
      return static_cast<std::int32_t>(u);
    }
    const auto s = v.get<std::int64_t>();
    if (s < std::numeric_limits<std::int32_t>::min() || s > std::numeric_limits<std::int32_t>::max())
      return bad(key, "is out of range");
    return static_cast<std::int32_t>(s);
  }
  StatusOr<std::int32_t> int32(const char* key, std::int32_t fallback) const {
    if (!has(key)) return fallback;
    return int32(key);
  }
  StatusOr<std::int32_t> positive(const char* key) const {
    auto v = int32(key);
    if (!v.ok()) return v.status();
    if (*v <= 0) return bad(key, "must be positive");
    return *v;
  }
  StatusOr<std::int32_t> positive(const char* key, std::int32_t fallback) const {
    if (!has(key)) return fallback;
    return positive(key);
  }
  // A size: positive and at most `max` (ModelConfig::kMax*).
  StatusOr<std::int32_t> size(const char* key, std::int32_t max) const {
    auto v = positive(key);
    if (!v.ok()) return v.status();
    if (*v > max) return bad(key, "must be at most " + std::to_string(max));
    return *v;
  }
  StatusOr<std::int32_t> size(const char* key, std::int32_t max, std::int32_t fallback) const {
    if (!has(key)) return fallback;
    return size(key, max);
  }
  StatusOr<double> number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_number()) return bad(key, "must be a number");
    return v.get<double>();
  }
  StatusOr<bool> boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_boolean()) return bad(key, "must be true or false");
    return v.get<bool>();
  }

  const std::string& source() const { return source_; }

 private:
  const json& j_;
  std::string source_;
};

// Assigns the value of a StatusOr expression to `lhs`, or returns its error.
#define SY_ASSIGN_CFG(lhs, expr)            \
  do {                                      \
    auto sy_v_ = (expr);                    \
    if (!sy_v_.ok()) return sy_v_.status(); \
    lhs = *sy_v_;                           \
  } while (0)

// rope_scaling (transformers 4) or rope_parameters (transformers 5), read as transformers'
// standardize_rope_params reads them: a non-empty rope_scaling replaces rope_parameters; the
// object's rope_theta overrides the top-level one; yarn and llama3 take their pretraining
// context from max_position_embeddings when the object does not say. Keys a type does not use
// are refused (transformers only warns): the model they describe is not the one we would run.
Status read_rope(const Reader& r, ModelConfig* c) {
  const char* key = nullptr;
  if (r.has("rope_scaling") && !(r.at("rope_scaling").is_object() && r.at("rope_scaling").empty())) {
    key = "rope_scaling";
  } else if (r.has("rope_parameters")) {
    key = "rope_parameters";
  }
  if (key == nullptr) return Status::Ok();
  const json& v = r.at(key);
  if (!v.is_object()) return r.bad(key, "must be an object or null");
  const Reader o(v, std::string(key) + " of " + r.source());

  std::string type = "default";
  for (const char* type_key : {"rope_type", "type"}) {
    if (!o.has(type_key)) continue;
    if (!o.at(type_key).is_string()) return o.bad(type_key, "must be a string");
    type = o.at(type_key).get<std::string>();
    break;
  }
  RopeScaling& s = c->rope_scaling;
  s = RopeScaling{};
  std::vector<std::string> known = {"rope_type", "type", "rope_theta", "partial_rotary_factor"};
  if (type == "default") {
  } else if (type == "linear") {
    s.type = RopeType::Linear;
    known.insert(known.end(), {"factor"});
  } else if (type == "yarn") {
    s.type = RopeType::Yarn;
    known.insert(known.end(), {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow",
                               "mscale", "mscale_all_dim", "truncate"});
  } else if (type == "llama3") {
    s.type = RopeType::Llama3;
    known.insert(known.end(), {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"});
  } else {
    const bool runtime = type == "dynamic" || type == "longrope";
    return Status::Error("key '" + std::string(key) + "' in " + r.source() + " asks for rope_type '" + type + "': " +
                         (runtime ? "its frequencies change with the length of the batch at run time, which a server "
                                    "batching sequences of different lengths cannot reproduce; "
                                  : "not a RoPE variant this engine knows; ") +
                         "supported: default, linear, yarn, llama3; got " + v.dump());
  }
  for (const auto& [name, value] : v.items()) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    return Status::Error("key '" + std::string(key) + "' in " + r.source() + " sets '" + name + "', which rope_type '" +
                         type + "' does not use; got " + v.dump());
  }
  SY_ASSIGN_CFG(c->rope_theta, o.number("rope_theta", c->rope_theta));
  double partial = 1;
  SY_ASSIGN_CFG(partial, o.number("partial_rotary_factor", 1.0));
  if (partial != 1.0) return o.bad("partial_rotary_factor", "must be 1 (partial rotary embeddings are not implemented)");
  if (s.type == RopeType::Default) return Status::Ok();

  // A positive, finite number.
  const auto positive = [&](const char* name, double fallback, double* out) -> Status {
    SY_ASSIGN_CFG(*out, o.number(name, fallback));
    if (!(*out > 0) || !std::isfinite(*out)) return o.bad(name, "must be a positive number");
    return Status::Ok();
  };
  if (!v.contains("factor")) return o.missing("factor");
  SY_ASSIGN_CFG(s.original_max_position_embeddings,
                o.positive("original_max_position_embeddings", c->max_position_embeddings));
  if (s.type == RopeType::Yarn && !o.has("factor")) {
    // transformers: a null factor is the ratio of the context lengths (DeepSeek-V3's form).
    s.factor = static_cast<double>(c->max_position_embeddings) / s.original_max_position_embeddings;
  } else {
    SY_RETURN_IF_ERROR(positive("factor", 0, &s.factor));
  }
  if (s.type == RopeType::Yarn) {
    if (o.has("attention_factor")) {
      double a = 0;
      SY_RETURN_IF_ERROR(positive("attention_factor", 0, &a));
      s.attention_factor = a;
    }
    // transformers tests them for truth: 0 or null means not given.
    for (auto [name, out] : {std::pair{"mscale", &s.mscale}, std::pair{"mscale_all_dim", &s.mscale_all_dim}}) {
      SY_ASSIGN_CFG(*out, o.number(name, 0));
      if (!std::isfinite(*out)) return o.bad(name, "must be a finite number");
    }
    for (auto [name, out, fallback] : {std::tuple{"beta_fast", &s.beta_fast, 32.0}, std::tuple{"beta_slow", &s.beta_slow, 1.0}}) {
      SY_ASSIGN_CFG(*out, o.number(name, fallback));
      if (*out == 0) *out = fallback;  // `get(name) or default`
      if (!(*out > 0) || !std::isfinite(*out)) return o.bad(name, "must be a positive number");
    }
    SY_ASSIGN_CFG(s.truncate, o.boolean("truncate", true));
  }
  if (s.type == RopeType::Llama3) {
    for (const char* name : {"low_freq_factor", "high_freq_factor"})
      if (!o.has(name)) return o.missing(name);
    SY_RETURN_IF_ERROR(positive("low_freq_factor", 0, &s.low_freq_factor));
    SY_RETURN_IF_ERROR(positive("high_freq_factor", 0, &s.high_freq_factor));
    if (!(s.high_freq_factor > s.low_freq_factor))
      return o.bad("high_freq_factor", "must be greater than low_freq_factor (" + std::to_string(s.low_freq_factor) + ")");
  }
  return Status::Ok();
}

// DBRX's own config.json (transformers DbrxConfig): d_model, n_heads, n_layers, max_seq_len and
// vocab_size at the top, the attention and FFN settings in the objects attn_config and
// ffn_config. It lands in the ModelConfig members Mixtral uses (every layer routed, each expert a
// SwiGLU of width ffn_hidden_size), which is all the simulator reads. Keys that only change values,
// not shapes (clip_qkv, moe_jitter_eps, dropouts, loss weights), are not read.
Status read_dbrx(const Reader& r, ModelConfig* c) {
  const std::string& source = r.source();
  SY_ASSIGN_CFG(c->vocab_size, r.size("vocab_size", ModelConfig::kMaxVocab));
  SY_ASSIGN_CFG(c->hidden_size, r.size("d_model", ModelConfig::kMaxHidden));
  SY_ASSIGN_CFG(c->num_layers, r.size("n_layers", ModelConfig::kMaxLayers));
  SY_ASSIGN_CFG(c->num_heads, r.size("n_heads", ModelConfig::kMaxHeads));
  SY_ASSIGN_CFG(c->max_position_embeddings, r.positive("max_seq_len", 2048));
  SY_ASSIGN_CFG(c->tie_word_embeddings, r.boolean("tie_word_embeddings", false));
  if (c->tie_word_embeddings) return r.bad("tie_word_embeddings", "must be false (DBRX never ties its embeddings)");
  for (const char* key : {"attn_config", "ffn_config"}) {
    if (!r.has(key)) return r.missing(key);
    if (!r.at(key).is_object()) return r.bad(key, "must be an object");
  }

  const Reader attn(r.at("attn_config"), "attn_config of " + source);
  SY_ASSIGN_CFG(c->num_kv_heads, attn.positive("kv_n_heads"));
  SY_ASSIGN_CFG(c->rope_theta, attn.number("rope_theta", 1e4));
  if (!(c->rope_theta > 0) || !std::isfinite(c->rope_theta)) return attn.bad("rope_theta", "must be positive");

  const Reader ffn(r.at("ffn_config"), "ffn_config of " + source);
  SY_ASSIGN_CFG(c->intermediate_size, ffn.size("ffn_hidden_size", ModelConfig::kMaxIntermediate));
  c->moe_intermediate_size = c->intermediate_size;
  SY_ASSIGN_CFG(c->num_experts, ffn.size("moe_num_experts", ModelConfig::kMaxExperts));
  SY_ASSIGN_CFG(c->top_k, ffn.positive("moe_top_k"));
  if (c->top_k > c->num_experts) {
    return Status::Error("moe_top_k (" + std::to_string(c->top_k) + ") exceeds moe_num_experts (" +
                         std::to_string(c->num_experts) + ") in ffn_config of " + source);
  }
  if (ffn.has("ffn_act_fn")) {
    const json& act = ffn.at("ffn_act_fn");
    if (!act.is_object() || !act.contains("name") || act.at("name") != "silu")
      return ffn.bad("ffn_act_fn", "is not supported (only {\"name\": \"silu\"})");
  }
  // The top-k weights are divided by their p-norm with p = moe_normalize_expert_weights (default
  // 1: Mixtral's renormalisation); null leaves them as the softmax gave them.
  c->norm_topk_prob = true;
  if (ffn.contains("moe_normalize_expert_weights")) {
    const json& v = ffn.at("moe_normalize_expert_weights");
    if (v.is_null()) c->norm_topk_prob = false;
    else if (!v.is_number() || v.get<double>() != 1.0)
      return ffn.bad("moe_normalize_expert_weights", "is not supported (only 1 or null)");
  }

  if (c->num_heads % c->num_kv_heads != 0) {
    return Status::Error("n_heads (" + std::to_string(c->num_heads) + ") is not divisible by kv_n_heads (" +
                         std::to_string(c->num_kv_heads) + ") in " + source);
  }
  c->head_dim = c->hidden_size / c->num_heads;
  if (c->head_dim <= 0 || c->head_dim % 2 != 0 ||
      static_cast<std::int64_t>(c->head_dim) * c->num_heads != c->hidden_size) {
    return Status::Error("d_model (" + std::to_string(c->hidden_size) + ") / n_heads (" +
                         std::to_string(c->num_heads) + ") in " + source +
                         " must be a whole, even head size for rotary embeddings");
  }
  if (c->head_dim > ModelConfig::kMaxHeadDim) {
    return Status::Error("d_model (" + std::to_string(c->hidden_size) + ") / n_heads (" +
                         std::to_string(c->num_heads) + ") in " + source + " is a head size of " +
                         std::to_string(c->head_dim) + ", above the most supported, " +
                         std::to_string(ModelConfig::kMaxHeadDim));
  }
  c->sparse_layers.assign(static_cast<std::size_t>(c->num_layers), true);
  c->rms_norm_eps = 1e-5f;  // DBRX's norms are LayerNorms with eps 1e-5, not in config.json
  return Status::Ok();
}

// The keys every architecture reads the same way: the checkpoint dtype and the stop token.
Status read_dtype_and_eos(const Reader& r, ModelConfig* c) {
  // Checkpoint dtype: transformers 5 writes "dtype", earlier versions "torch_dtype".
  c->dtype = kernels::DType::F32;
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (!r.has(key)) continue;
    if (!r.at(key).is_string()) return r.bad(key, "must be a string");
    std::string name = r.at(key).get<std::string>();
    if (name.rfind("torch.", 0) == 0) name = name.substr(6);
    if (name == "float32" || name == "float") {
      c->dtype = kernels::DType::F32;
    } else if (name == "float16" || name == "half") {
      c->dtype = kernels::DType::F16;
    } else if (name == "bfloat16") {
      c->dtype = kernels::DType::BF16;
    } else {
      return r.bad(key, "is not supported (float32, float16 or bfloat16)");
    }
    break;
  }

  if (r.has("eos_token_id")) {
    const json& v = r.at("eos_token_id");
    const json* first = &v;
    if (v.is_array()) {
      if (v.empty()) first = nullptr;
      else first = &v.front();
    }
    if (first != nullptr) {
      if (!first->is_number_integer()) return r.bad("eos_token_id", "must be a token id or a list of token ids");
      const auto id = first->get<std::int64_t>();
      if (id < 0 || id >= c->vocab_size) return r.bad("eos_token_id", "must lie in [0, vocab_size)");
      c->eos_token_id = static_cast<std::int32_t>(id);
    }
  }
  if (r.has("bos_token_id")) {
    const json& v = r.at("bos_token_id");
    if (!v.is_number_integer()) return r.bad("bos_token_id", "must be a token id");
    const auto id = v.get<std::int64_t>();
    if (id < 0 || id >= c->vocab_size) return r.bad("bos_token_id", "must lie in [0, vocab_size)");
    c->bos_token_id = static_cast<std::int32_t>(id);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ModelConfig> ModelConfig::from_json(const std::string& text, const std::string& source) {
  auto parsed = parse_json(text);
  if (!parsed.ok()) return Status::Error(source + " is not valid JSON: " + parsed.status().message());
  json j = std::move(parsed).value();
  if (!j.is_object()) return Status::Error(source + " must hold a JSON object, got " + std::string(j.type_name()));
  const Reader r(j, source);

  ModelConfig c;
  if (!r.has("model_type")) return r.missing("model_type");
  if (!r.at("model_type").is_string()) return r.bad("model_type", "must be a string");
  {
    const std::string model_type = r.at("model_type").get<std::string>();
    auto arch = parse_arch(model_type);
    if (!arch.ok()) {
      return Status::Error("unsupported model_type '" + model_type + "' in " + source +
                           " (supported: mixtral, qwen2_moe, qwen3_moe, olmoe; dbrx as a simulator shape only)");
    }
    c.arch = *arch;
  }
  if (c.arch == Arch::Dbrx) {
    SY_RETURN_IF_ERROR(read_dbrx(r, &c));
    SY_RETURN_IF_ERROR(read_dtype_and_eos(r, &c));
    return c;
  }
  const bool mixtral = c.arch == Arch::Mixtral;
  const bool qwen2 = c.arch == Arch::Qwen2Moe;
  const bool qwen3 = c.arch == Arch::Qwen3Moe;
  // OLMoE: every layer routed, each expert of width intermediate_size (as Mixtral), experts
  // under mlp. (as Qwen), q and k each RMS-normalised over its whole projection.
  const bool olmoe = c.arch == Arch::Olmoe;
  const bool all_sparse = mixtral || olmoe;

  SY_ASSIGN_CFG(c.vocab_size, r.size("vocab_size", ModelConfig::kMaxVocab));
  SY_ASSIGN_CFG(c.hidden_size, r.size("hidden_size", ModelConfig::kMaxHidden));
  SY_ASSIGN_CFG(c.num_layers, r.size("num_hidden_layers", ModelConfig::kMaxLayers));
  SY_ASSIGN_CFG(c.num_heads, r.size("num_attention_heads", ModelConfig::kMaxHeads));
  SY_ASSIGN_CFG(c.num_kv_heads, r.positive("num_key_value_heads", c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0) {
    return Status::Error("num_attention_heads (" + std::to_string(c.num_heads) +
                         ") is not divisible by num_key_value_heads (" + std::to_string(c.num_kv_heads) +
                         ") in " + source);
  }
  SY_ASSIGN_CFG(c.head_dim, r.size("head_dim", ModelConfig::kMaxHeadDim, c.hidden_size / c.num_heads));
  if (c.head_dim > ModelConfig::kMaxHeadDim) {
    return Status::Error("head_dim is not given and hidden_size (" + std::to_string(c.hidden_size) +
                         ") / num_attention_heads (" + std::to_string(c.num_heads) + ") is " +
                         std::to_string(c.head_dim) + ", above the most supported, " +
                         std::to_string(ModelConfig::kMaxHeadDim) + ", in " + source);
  }
  // In 64 bits: head_dim 1073741856 times 4 heads wraps to 128 in 32.
  if (olmoe && static_cast<std::int64_t>(c.head_dim) * c.num_heads != c.hidden_size) {
    // transformers' OlmoeAttention normalises q over hidden_size values: the heads must fill it.
    return Status::Error("head_dim (" + std::to_string(c.head_dim) + ") times num_attention_heads (" +
                         std::to_string(c.num_heads) + ") must equal hidden_size (" + std::to_string(c.hidden_size) +
                         ") for olmoe (its q_norm spans hidden_size) in " + source);
  }
  if (c.head_dim <= 0) {
    return Status::Error("head_dim is not given and hidden_size (" + std::to_string(c.hidden_size) +
                         ") / num_attention_heads (" + std::to_string(c.num_heads) + ") is 0 in " + source);
  }
  if (c.head_dim % 2 != 0) {
    return Status::Error("head_dim (" + std::to_string(c.head_dim) + ") in " + source +
                         " must be even for rotary embeddings");
  }

  if (r.has("hidden_act")) {
    if (!r.at("hidden_act").is_string() || r.at("hidden_act").get<std::string>() != "silu")
      return r.bad("hidden_act", "is not supported (only \"silu\")");
  }

  // Experts.
  const char* experts_key = mixtral ? "num_local_experts" : "num_experts";
  if (!r.has(experts_key) && r.has(mixtral ? "num_experts" : "num_local_experts"))
    experts_key = mixtral ? "num_experts" : "num_local_experts";  // transformers attribute_map alias
  SY_ASSIGN_CFG(c.num_experts, r.size(experts_key, ModelConfig::kMaxExperts));
  SY_ASSIGN_CFG(c.top_k, r.positive("num_experts_per_tok"));
  if (c.top_k > c.num_experts) {
    return Status::Error("num_experts_per_tok (" + std::to_string(c.top_k) + ") exceeds " + experts_key + " (" +
                         std::to_string(c.num_experts) + ") in " + source);
  }

  // Which layers route to experts.
  c.sparse_layers.assign(static_cast<std::size_t>(c.num_layers), true);
  if (!all_sparse) {
    std::int32_t step = 1;
    SY_ASSIGN_CFG(step, r.positive("decoder_sparse_step", 1));
    std::vector<std::int64_t> mlp_only;
    if (r.has("mlp_only_layers")) {
      const json& v = r.at("mlp_only_layers");
      if (!v.is_array()) return r.bad("mlp_only_layers", "must be a list of layer indices");
      for (const json& e : v) {
        if (!e.is_number_integer()) return r.bad("mlp_only_layers", "must be a list of layer indices");
        mlp_only.push_back(e.get<std::int64_t>());
      }
    }
    for (std::int32_t i = 0; i < c.num_layers; ++i) c.sparse_layers[static_cast<std::size_t>(i)] = (i + 1) % step == 0;
    // Marked, not searched per layer: a list as long as the layers made parsing quadratic.
    for (std::int64_t m : mlp_only)
      if (m >= 0 && m < c.num_layers) c.sparse_layers[static_cast<std::size_t>(m)] = false;
  }
  bool any_dense = false;
  for (bool s : c.sparse_layers) any_dense = any_dense || !s;

  // FFN widths.
  if (all_sparse) {
    SY_ASSIGN_CFG(c.intermediate_size, r.size("intermediate_size", ModelConfig::kMaxIntermediate));
    c.moe_intermediate_size = c.intermediate_size;
  } else {
    SY_ASSIGN_CFG(c.moe_intermediate_size, r.size("moe_intermediate_size", ModelConfig::kMaxIntermediate));
    if (any_dense || r.has("intermediate_size"))
      SY_ASSIGN_CFG(c.intermediate_size, r.size("intermediate_size", ModelConfig::kMaxIntermediate));
  }
  if (qwen2)
    SY_ASSIGN_CFG(c.shared_expert_intermediate_size,
                  r.size("shared_expert_intermediate_size", ModelConfig::kMaxIntermediate));

  // Routing weights: Mixtral always renormalises the top-k softmax weights.
  if (mixtral) {
    c.norm_topk_prob = true;
  } else {
    SY_ASSIGN_CFG(c.norm_topk_prob, r.boolean("norm_topk_prob", false));
  }

  // Attention extras.
  if (qwen2) SY_ASSIGN_CFG(c.qkv_bias, r.boolean("qkv_bias", true));
  if (qwen3) {
    bool attention_bias = false;
    SY_ASSIGN_CFG(attention_bias, r.boolean("attention_bias", false));
    if (attention_bias) return r.bad("attention_bias", "is not supported for qwen3_moe (only false)");
    c.qk_norm = true;
  }
  if (olmoe) {
    bool attention_bias = false;
    SY_ASSIGN_CFG(attention_bias, r.boolean("attention_bias", false));
    if (attention_bias) return r.bad("attention_bias", "is not supported for olmoe (only false)");
    if (r.has("clip_qkv")) return r.bad("clip_qkv", "is not supported (only null: q, k and v unclipped)");
    c.qk_norm = true;
    c.qk_norm_per_head = false;
  }

  double eps = 0;
  SY_ASSIGN_CFG(eps, r.number("rms_norm_eps", mixtral || olmoe ? 1e-5 : 1e-6));
  // Kept as a float (as the kernels use it): outside a float's normal range it would become 0
  // or infinity, a model other than the one the file describes.
  if (!(eps >= static_cast<double>(std::numeric_limits<float>::min()) &&
        eps <= static_cast<double>(std::numeric_limits<float>::max())))
    return r.bad("rms_norm_eps", "must be positive, within a float's range (about 1.2e-38 to 3.4e38)");
  c.rms_norm_eps = static_cast<float>(eps);

  SY_ASSIGN_CFG(c.tie_word_embeddings, r.boolean("tie_word_embeddings", false));
  SY_ASSIGN_CFG(c.max_position_embeddings,
                r.positive("max_position_embeddings", mixtral ? 4096 * 32 : olmoe ? 4096 : 32768));

  SY_ASSIGN_CFG(c.rope_theta, r.number("rope_theta", mixtral ? 1e6 : 1e4));
  SY_RETURN_IF_ERROR(read_rope(r, &c));
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta)) {
    return Status::Error("rope_theta (" + std::to_string(c.rope_theta) + ") in " + source + " must be positive");
  }

  // Sliding-window attention is not implemented: accept only windows that never bite.
  {
    bool use_window = true;
    if (!mixtral) SY_ASSIGN_CFG(use_window, r.boolean("use_sliding_window", false));
    if (use_window && r.has("sliding_window")) {
      std::int32_t window = 0;
      SY_ASSIGN_CFG(window, r.int32("sliding_window"));
      if (window > 0 && window < c.max_position_embeddings) {
        return Status::Error("sliding_window " + std::to_string(window) + " (below max_position_embeddings " +
                             std::to_string(c.max_position_embeddings) + ") in " + source +
                             " is not supported: sliding-window attention is not implemented" +
                             (mixtral ? "" : " (set use_sliding_window to false)"));
      }
    }
  }

  SY_RETURN_IF_ERROR(read_dtype_and_eos(r, &c));
  return c;
}

StatusOr<ModelConfig> ModelConfig::from_file(const std::filesystem::path& config_json) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(config_json, ec)) {
    return Status::Error("no config.json: " + config_json.string() + " does not exist or is not a file");
  }
  std::ifstream in(config_json, std::ios::binary);
  if (!in) return Status::Error("cannot open " + config_json.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::Error("cannot read " + config_json.string());
  return from_json(text.str(), config_json.string());
}

std::int64_t ModelConfig::parameter_count() const {
  const std::int64_t V = vocab_size, H = hidden_size, D = head_dim;
  const std::int64_t q = static_cast<std::int64_t>(num_heads) * D;
  const std::int64_t kv = static_cast<std::int64_t>(num_kv_heads) * D;
  std::int64_t n = V * H + (tie_word_embeddings ? 0 : V * H) + H;
  for (std::int32_t i = 0; i < num_layers; ++i) {
    n += 2 * H;                            // input and post-attention norms
    n += H * q + 2 * H * kv + q * H;       // q, k, v, o projections
    if (qkv_bias) n += q + 2 * kv;
    if (qk_norm) n += qk_norm_per_head ? 2 * D : q + kv;
    if (static_cast<std::size_t>(i) < sparse_layers.size() && sparse_layers[static_cast<std::size_t>(i)]) {
      n += static_cast<std::int64_t>(num_experts) * H;                                   // router
      n += static_cast<std::int64_t>(num_experts) * 3 * H * moe_intermediate_size;       // experts
      if (has_shared_expert()) n += 3 * H * shared_expert_intermediate_size + H;         // shared + gate
    } else {
      n += 3 * H * intermediate_size;
    }
  }
  return n;
}

std::int64_t ModelConfig::active_parameter_count() const {
  std::int64_t skipped = 0;
  const std::int64_t per_expert = 3 * static_cast<std::int64_t>(hidden_size) * moe_intermediate_size;
  for (std::int32_t i = 0; i < num_layers; ++i)
    if (static_cast<std::size_t>(i) < sparse_layers.size() && sparse_layers[static_cast<std::size_t>(i)])
      skipped += static_cast<std::int64_t>(num_experts - top_k) * per_expert;
  return parameter_count() - skipped;
}

namespace {

// The rope_scaling object read_rope reads back as `s` (null for plain RoPE); defaults are left out.
nlohmann::ordered_json rope_scaling_json(const RopeScaling& s) {
  if (!s.scaled()) return nullptr;
  nlohmann::ordered_json j;
  j["rope_type"] = rope_type_name(s.type);
  j["factor"] = s.factor;
  if (s.type == RopeType::Linear) return j;
  j["original_max_position_embeddings"] = s.original_max_position_embeddings;
  if (s.type == RopeType::Llama3) {
    j["low_freq_factor"] = s.low_freq_factor;
    j["high_freq_factor"] = s.high_freq_factor;
    return j;
  }
  if (s.attention_factor) j["attention_factor"] = *s.attention_factor;
  if (s.mscale != 0) j["mscale"] = s.mscale;
  if (s.mscale_all_dim != 0) j["mscale_all_dim"] = s.mscale_all_dim;
  if (s.beta_fast != 32) j["beta_fast"] = s.beta_fast;
  if (s.beta_slow != 1) j["beta_slow"] = s.beta_slow;
  if (!s.truncate) j["truncate"] = false;
  return j;
}

}  // namespace

kernels::Rope ModelConfig::rope() const {
  RopeFrequencies f = rope_frequencies(head_dim, rope_theta, rope_scaling);
  return kernels::Rope(head_dim, std::move(f.inv_freq), f.attention_scaling);
}

std::string ModelConfig::to_json() const {
  if (arch == Arch::Dbrx) return dbrx_json(*this);
  const bool mixtral = arch == Arch::Mixtral;
  nlohmann::ordered_json j;
  j["architectures"] = {architecture_class(arch)};
  j["model_type"] = arch_name(arch);
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  // A Qwen MoE model without dense blocks may leave it out (the parser then keeps 0); writing
  // the 0 would give a config.json that its own parser refuses.
  if (intermediate_size > 0) j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_layers;
  j["num_attention_heads"] = num_heads;
  j["num_key_value_heads"] = num_kv_heads;
  j["head_dim"] = head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = max_position_embeddings;
  j["initializer_range"] = 0.02;
  j["rms_norm_eps"] = shortest_double(rms_norm_eps);
  j["rope_theta"] = rope_theta;
  j["rope_scaling"] = rope_scaling_json(rope_scaling);
  j["attention_dropout"] = 0.0;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["use_cache"] = true;
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  else j["bos_token_id"] = nullptr;
  if (eos_token_id) j["eos_token_id"] = *eos_token_id;
  else j["eos_token_id"] = nullptr;  // explicit: the config classes would otherwise default it
  j["num_experts_per_tok"] = top_k;
  j["output_router_logits"] = false;
  j["router_aux_loss_coef"] = 0.001;
  if (mixtral) {
    j["num_local_experts"] = num_experts;
    j["router_jitter_noise"] = 0.0;
    j["sliding_window"] = nullptr;
  } else if (arch == Arch::Olmoe) {
    j["num_experts"] = num_experts;
    j["norm_topk_prob"] = norm_topk_prob;
    j["attention_bias"] = false;
    j["clip_qkv"] = nullptr;
  } else {
    // Express sparse_layers as decoder_sparse_step + mlp_only_layers: the largest step for which
    // every sparse layer i has (i + 1) % step == 0, the remaining dense layers listed explicitly.
    // That step is the gcd of the sparse layers' i + 1 (1 when none is sparse); a search over
    // the steps was quadratic in the layers (the fuzzer found a config that took 36 s).
    std::int32_t step = 0;
    for (std::int32_t i = 0; i < num_layers; ++i)
      if (is_sparse(i)) step = std::gcd(step, i + 1);
    if (step == 0) step = 1;
    std::vector<std::int32_t> mlp_only;
    for (std::int32_t i = 0; i < num_layers; ++i)
      if (!is_sparse(i) && (i + 1) % step == 0) mlp_only.push_back(i);
    j["num_experts"] = num_experts;
    j["moe_intermediate_size"] = moe_intermediate_size;
    if (arch == Arch::Qwen2Moe) {
      j["shared_expert_intermediate_size"] = shared_expert_intermediate_size;
      j["qkv_bias"] = qkv_bias;
    } else {
      j["attention_bias"] = false;
    }
    j["norm_topk_prob"] = norm_topk_prob;
    j["decoder_sparse_step"] = step;
    j["mlp_only_layers"] = mlp_only;
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = num_layers;
  }
  j["dtype"] = torch_dtype_name(dtype);
  j["torch_dtype"] = torch_dtype_name(dtype);
  return j.dump(2) + "\n";
}

}  // namespace sy
