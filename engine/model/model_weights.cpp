// Resolves every tensor a model uses by its Hugging Face name and checks its shape against the
// shape config.json implies. Weights stay in the memory-mapped checkpoint; only the q/k/v biases
// are converted to float32 and owned.
#include "engine/model/model_weights.h"

#include <string>
#include <system_error>
#include <utility>

#include "engine/model/checkpoint.h"

namespace sy {

namespace fs = std::filesystem;

ModelWeights::ModelWeights() = default;
ModelWeights::ModelWeights(ModelWeights&&) noexcept = default;
ModelWeights::~ModelWeights() = default;

namespace {

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

class Resolver {
 public:
  explicit Resolver(const Checkpoint& ckpt) : ckpt_(ckpt) {}

  StatusOr<const TensorInfo*> shaped(const std::string& name, const std::vector<std::int64_t>& shape) {
    auto info = ckpt_.get(name);
    if (!info.ok()) return info.status();
    if (!(*info)->computable) {
      return Status::Error("tensor '" + name + "' in " + (*info)->file.string() + " has dtype " +
                           (*info)->dtype_name + ", which the model cannot compute with (supported: F32, F16, BF16)");
    }
    if ((*info)->shape != shape) {
      return Status::Error("tensor '" + name + "' has shape " + shape_string((*info)->shape) + " in " +
                           (*info)->file.string() + " but config.json implies " + shape_string(shape));
    }
    used_.push_back(*info);
    return *info;
  }

  // Every tensor resolved so far, in order: what the model reads.
  const std::vector<const TensorInfo*>& used() const { return used_; }

  Status matrix(const std::string& name, std::int64_t rows, std::int64_t cols, kernels::WeightView* out) {
    auto info = shaped(name, {rows, cols});
    if (!info.ok()) return info.status();
    *out = kernels::WeightView{(*info)->data, (*info)->dtype, rows, cols};
    return Status::Ok();
  }

  Status vector(const std::string& name, std::int64_t size, VectorView* out) {
    auto info = shaped(name, {size});
    if (!info.ok()) return info.status();
    *out = VectorView{(*info)->data, (*info)->dtype, size};
    return Status::Ok();
  }

  Status ffn(const std::string& prefix, const char* gate, const char* up, const char* down, std::int64_t hidden,
             std::int64_t width, FfnWeights* out) {
    SY_RETURN_IF_ERROR(matrix(prefix + gate + ".weight", width, hidden, &out->gate));
    SY_RETURN_IF_ERROR(matrix(prefix + up + ".weight", width, hidden, &out->up));
    SY_RETURN_IF_ERROR(matrix(prefix + down + ".weight", hidden, width, &out->down));
    return Status::Ok();
  }

 private:
  const Checkpoint& ckpt_;
  std::vector<const TensorInfo*> used_;
};

}  // namespace

StatusOr<std::shared_ptr<const ModelWeights>> ModelWeights::load(
    const fs::path& dir, WeightCheck check, const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::Error("model directory " + dir.string() + " does not exist");
  auto config = ModelConfig::from_file(dir / "config.json");
  if (!config.ok()) return config.status();
  // Checked before the checkpoint is opened: a shapes-only directory usually has no weights at all.
  if (config->shapes_only()) {
    return Status::Error(arch_name(config->arch) + ": shapes only (simulator); weight loading is not supported (" +
                         (dir / "config.json").string() + ")");
  }
  auto ckpt = Checkpoint::open(dir);
  if (!ckpt.ok()) return ckpt.status();

  std::shared_ptr<ModelWeights> w(new ModelWeights());
  w->dir_ = dir;
  w->config_ = std::move(*config);
  w->checkpoint_ = std::move(*ckpt);
  const ModelConfig& c = w->config_;
  Resolver r(*w->checkpoint_);

  const std::int64_t V = c.vocab_size, H = c.hidden_size, D = c.head_dim;
  const std::int64_t q_out = c.num_heads * D, kv_out = c.num_kv_heads * D;

  SY_RETURN_IF_ERROR(r.matrix("model.embed_tokens.weight", V, H, &w->embed_tokens_));
  SY_RETURN_IF_ERROR(r.vector("model.norm.weight", H, &w->final_norm_));
  // Tied embeddings: lm_head is embed_tokens unless the checkpoint stores an lm_head.weight of
  // its own (transformers 5 then leaves the two untied and uses the stored one).
  if (c.tie_word_embeddings && w->checkpoint_->find("lm_head.weight") == nullptr) {
    w->lm_head_ = w->embed_tokens_;
  } else {
    SY_RETURN_IF_ERROR(r.matrix("lm_head.weight", V, H, &w->lm_head_));
  }

  auto bias = [&](const std::string& name, std::int64_t size, const float** out) -> Status {
    VectorView v;
    SY_RETURN_IF_ERROR(r.vector(name, size, &v));
    std::vector<float> values(static_cast<std::size_t>(size));
    kernels::convert_to_f32(v.data, v.dtype, values.data(), values.size());
    w->owned_.push_back(std::move(values));
    *out = w->owned_.back().data();  // the buffer survives moves of owned_
    return Status::Ok();
  };

  w->layers_.resize(static_cast<std::size_t>(c.num_layers));
  for (std::int32_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& L = w->layers_[static_cast<std::size_t>(i)];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    SY_RETURN_IF_ERROR(r.vector(p + "input_layernorm.weight", H, &L.input_norm));
    SY_RETURN_IF_ERROR(r.vector(p + "post_attention_layernorm.weight", H, &L.post_attention_norm));
    const std::string a = p + "self_attn.";
    SY_RETURN_IF_ERROR(r.matrix(a + "q_proj.weight", q_out, H, &L.q_proj));
    SY_RETURN_IF_ERROR(r.matrix(a + "k_proj.weight", kv_out, H, &L.k_proj));
    SY_RETURN_IF_ERROR(r.matrix(a + "v_proj.weight", kv_out, H, &L.v_proj));
    SY_RETURN_IF_ERROR(r.matrix(a + "o_proj.weight", H, q_out, &L.o_proj));
    if (c.qkv_bias) {
      SY_RETURN_IF_ERROR(bias(a + "q_proj.bias", q_out, &L.q_bias));
      SY_RETURN_IF_ERROR(bias(a + "k_proj.bias", kv_out, &L.k_bias));
      SY_RETURN_IF_ERROR(bias(a + "v_proj.bias", kv_out, &L.v_bias));
    }
    if (c.qk_norm) {
      SY_RETURN_IF_ERROR(r.vector(a + "q_norm.weight", c.qk_norm_per_head ? D : q_out, &L.q_norm));
      SY_RETURN_IF_ERROR(r.vector(a + "k_norm.weight", c.qk_norm_per_head ? D : kv_out, &L.k_norm));
    }

    L.sparse = c.is_sparse(i);
    if (!L.sparse) {
      SY_RETURN_IF_ERROR(r.ffn(p + "mlp.", "gate_proj", "up_proj", "down_proj", H, c.intermediate_size, &L.dense_mlp));
      continue;
    }
    const bool mixtral = c.arch == Arch::Mixtral;
    const std::string m = p + (mixtral ? "block_sparse_moe." : "mlp.");
    SY_RETURN_IF_ERROR(r.matrix(m + "gate.weight", c.num_experts, H, &L.router));
    L.experts.resize(static_cast<std::size_t>(c.num_experts));
    for (std::int32_t e = 0; e < c.num_experts; ++e) {
      const std::string ep = m + "experts." + std::to_string(e) + ".";
      FfnWeights& f = L.experts[static_cast<std::size_t>(e)];
      if (mixtral) SY_RETURN_IF_ERROR(r.ffn(ep, "w1", "w3", "w2", H, c.moe_intermediate_size, &f));
      else SY_RETURN_IF_ERROR(r.ffn(ep, "gate_proj", "up_proj", "down_proj", H, c.moe_intermediate_size, &f));
    }
    if (c.has_shared_expert()) {
      SY_RETURN_IF_ERROR(r.ffn(m + "shared_expert.", "gate_proj", "up_proj", "down_proj", H,
                               c.shared_expert_intermediate_size, &L.shared_expert));
      SY_RETURN_IF_ERROR(r.matrix(m + "shared_expert_gate.weight", 1, H, &L.shared_expert_gate));
    }
  }

  // Only what the model reads: a buffer it never uses (rotary_emb.inv_freq, an integer index)
  // cannot corrupt its outputs, and transformers loads such a file.
  std::uint64_t total = 0, checked = 0;
  for (const TensorInfo* tensor : r.used()) total += tensor->nbytes;
  for (const TensorInfo* tensor : r.used()) {
    SY_RETURN_IF_ERROR(check_finite(*tensor, check));
    checked += tensor->nbytes;
    if (progress) progress(checked, total);
  }
  return std::shared_ptr<const ModelWeights>(std::move(w));
}

}  // namespace sy
