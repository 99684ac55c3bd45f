// The architecture hyper-parameters of a Hugging Face MoE model, read from its config.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/rope_scaling.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cpu/rope.h"

namespace sy {

// Dbrx is a shape for the simulator only: its config.json is read, its weights are not (its
// checkpoints fuse q/k/v and the experts into tensors the loader does not know).
enum class Arch { Mixtral, Qwen2Moe, Qwen3Moe, Olmoe, Dbrx };

// "mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "dbrx" (the config.json model_type strings).
std::string arch_name(Arch arch);
StatusOr<Arch> parse_arch(const std::string& model_type);
// True for architectures whose config.json is read but whose weights cannot be loaded or written.
bool arch_is_shapes_only(Arch arch);

struct ModelConfig {
  // What config.json may ask for, each at least 4× the largest published model's (126 layers,
  // 512 experts, hidden 18432, FFN 73728, 128 heads, head_dim 256, vocab 256k): beyond them a
  // file only makes the engine allocate without end (std::bad_alloc) or overflow 64-bit
  // parameter and byte counts.
  static constexpr std::int32_t kMaxVocab = 1 << 24;  // the tokenizer's token-id bound
  static constexpr std::int32_t kMaxHidden = 1 << 17;
  static constexpr std::int32_t kMaxIntermediate = 1 << 19;
  static constexpr std::int32_t kMaxLayers = 1024;
  static constexpr std::int32_t kMaxHeads = 1024;
  static constexpr std::int32_t kMaxHeadDim = 1024;
  static constexpr std::int32_t kMaxExperts = 4096;

  Arch arch = Arch::Mixtral;
  std::int32_t vocab_size = 0;
  std::int32_t hidden_size = 0;
  std::int32_t num_layers = 0;
  std::int32_t num_heads = 0;
  std::int32_t num_kv_heads = 0;
  std::int32_t head_dim = 0;               // config head_dim, else hidden_size / num_heads
  std::int32_t intermediate_size = 0;      // dense MLP layers (and Mixtral's and DBRX's experts)
  std::int32_t moe_intermediate_size = 0;  // one routed expert's FFN width
  std::int32_t num_experts = 0;
  std::int32_t top_k = 0;
  bool norm_topk_prob = true;              // Mixtral always renormalises
  std::int32_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  bool qkv_bias = false;                   // qwen2_moe: q/k/v projections carry biases
  bool qk_norm = false;                    // RMSNorm of q and k after their projections:
  bool qk_norm_per_head = true;            //   per head (qwen3_moe), or over each whole projection (olmoe)
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;                // rope_scaling / rope_parameters beyond plain RoPE
  bool tie_word_embeddings = false;
  std::int32_t max_position_embeddings = 0;
  std::vector<bool> sparse_layers;         // per layer: routed experts (true) or dense MLP
  kernels::DType dtype = kernels::DType::BF16;  // torch_dtype / dtype of the checkpoint
  std::optional<std::int32_t> eos_token_id;    // generation stops after it (first of a list)
  std::optional<std::int32_t> bos_token_id;    // as config.json has it (the tokenizer decides what it adds)

  bool is_sparse(std::int32_t layer) const { return sparse_layers[layer]; }
  bool has_shared_expert() const { return shared_expert_intermediate_size > 0; }
  bool shapes_only() const { return arch_is_shapes_only(arch); }
  std::int64_t parameter_count() const;
  // Parameters one token passes through: parameter_count() less the routed experts it skips
  // (num_experts - top_k of them in every sparse layer).
  std::int64_t active_parameter_count() const;
  // The rotary embedding this config asks for: its frequencies and cos/sin factor.
  kernels::Rope rope() const;

  // Parses and validates config.json text; `source` names the file in error messages.
  static StatusOr<ModelConfig> from_json(const std::string& text, const std::string& source);
  static StatusOr<ModelConfig> from_file(const std::filesystem::path& config_json);
  // Writes the config.json a Hugging Face loader accepts for this architecture (for dbrx, in
  // DBRX's own format).
  std::string to_json() const;
};

}  // namespace sy
