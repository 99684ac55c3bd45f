// Randomly initialised models in Hugging Face layout (switchyard make-model, tests, benchmarks).
#include "engine/model/random_model.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/safetensors.h"

namespace sy {

namespace fs = std::filesystem;

StatusOr<ModelPreset> parse_preset(const std::string& name) {
  if (name == "tiny") return ModelPreset::Tiny;
  if (name == "small") return ModelPreset::Small;
  return Status::Error("unknown model preset '" + name + "' (expected tiny or small)");
}

ModelConfig preset_config(Arch arch, ModelPreset preset, kernels::DType dtype) {
  const bool tiny = preset == ModelPreset::Tiny;
  ModelConfig c;
  c.arch = arch;
  c.dtype = dtype;
  c.vocab_size = tiny ? 512 : 32000;
  c.hidden_size = tiny ? 128 : 1024;
  c.num_heads = tiny ? 4 : 16;
  c.num_kv_heads = tiny ? 2 : 4;
  c.head_dim = tiny ? 32 : 64;
  c.top_k = 2;
  c.max_position_embeddings = tiny ? 2048 : 4096;
  c.eos_token_id = 2;
  switch (arch) {
    case Arch::Dbrx:  // Mixtral's shape; write_random_model() refuses it (shapes only)
    case Arch::Mixtral:
      // ~1.9 M (tiny) / ~0.44 B (small) parameters; every layer routed, weights renormalised.
      c.num_layers = tiny ? 4 : 8;
      c.num_experts = 8;
      c.intermediate_size = c.moe_intermediate_size = tiny ? 128 : 1792;
      c.norm_topk_prob = true;
      c.rms_norm_eps = 1e-5f;
      c.rope_theta = 1e6;
      c.sparse_layers.assign(static_cast<std::size_t>(c.num_layers), true);
      break;
    case Arch::Qwen2Moe:
      // Shared expert with its sigmoid gate, q/k/v biases, layer 0 dense (mlp_only_layers),
      // top-k weights not renormalised.
      c.num_layers = tiny ? 4 : 12;
      c.num_experts = 8;
      c.moe_intermediate_size = tiny ? 128 : 1024;
      c.shared_expert_intermediate_size = tiny ? 256 : 2048;
      c.intermediate_size = tiny ? 256 : 2816;
      c.norm_topk_prob = false;
      c.qkv_bias = true;
      c.rms_norm_eps = 1e-6f;
      c.rope_theta = 1e4;
      c.sparse_layers.assign(static_cast<std::size_t>(c.num_layers), true);
      c.sparse_layers[0] = false;
      break;
    case Arch::Qwen3Moe:
      // q/k RMSNorm, decoder_sparse_step 2 (odd layers dense), renormalised top-k, tied
      // embeddings in the tiny preset.
      c.num_layers = tiny ? 4 : 12;
      c.num_experts = tiny ? 8 : 16;
      c.moe_intermediate_size = tiny ? 128 : 1024;
      c.intermediate_size = tiny ? 256 : 3072;
      c.norm_topk_prob = true;
      c.qk_norm = true;
      c.tie_word_embeddings = tiny;
      c.rms_norm_eps = 1e-6f;
      c.rope_theta = 1e6;
      c.sparse_layers.resize(static_cast<std::size_t>(c.num_layers));
      for (std::int32_t i = 0; i < c.num_layers; ++i) c.sparse_layers[static_cast<std::size_t>(i)] = (i + 1) % 2 == 0;
      break;
    case Arch::Olmoe:
      // q and k normalised over each whole projection, every layer routed, top-k weights not
      // renormalised; heads fill hidden_size (olmoe's q_norm spans it).
      c.num_layers = tiny ? 4 : 8;
      c.num_experts = tiny ? 8 : 16;
      c.top_k = tiny ? 2 : 4;
      c.head_dim = c.hidden_size / c.num_heads;
      c.intermediate_size = c.moe_intermediate_size = tiny ? 128 : 1024;
      c.norm_topk_prob = false;
      c.qk_norm = true;
      c.qk_norm_per_head = false;
      c.rms_norm_eps = 1e-5f;
      c.rope_theta = 1e4;
      c.sparse_layers.assign(static_cast<std::size_t>(c.num_layers), true);
      break;
  }
  return c;
}

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// xoshiro256+ : fast, good enough for initialisation noise.
struct Xoshiro {
  std::uint64_t s[4];
  explicit Xoshiro(std::uint64_t seed) {
    for (auto& v : s) v = seed = splitmix64(seed);
  }
  std::uint64_t next() {
    const std::uint64_t result = s[0] + s[3];
    const std::uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
  }
};

enum class Init { Normal, Norm, Bias };

struct PlannedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  Init init = Init::Normal;
  float sigma = 1.0f;  // for Init::Normal
  std::uint64_t numel() const {
    std::uint64_t n = 1;
    for (auto d : shape) n *= static_cast<std::uint64_t>(d);
    return n;
  }
};

// Every tensor of the model in Hugging Face order, with its initialisation. Linear weights are
// N(0, 1/fan_in) so each projection of a normalised activation has std ~1; the embedding is
// N(0, 1) (untied) and lm_head N(0, 4/H), so logits have std ~2; a tied embedding is N(0, 4/H)
// for the same logit scale. Norm weights are 1 + 0.1·N(0, 1), biases 0.1·N(0, 1).
std::vector<PlannedTensor> plan_tensors(const ModelConfig& c) {
  std::vector<PlannedTensor> t;
  const std::int64_t V = c.vocab_size, H = c.hidden_size, D = c.head_dim;
  const std::int64_t q_out = c.num_heads * D, kv_out = c.num_kv_heads * D;
  auto lin = [&](std::string name, std::int64_t rows, std::int64_t cols) {
    t.push_back({std::move(name), {rows, cols}, Init::Normal, 1.0f / std::sqrt(static_cast<float>(cols))});
  };
  auto norm = [&](std::string name, std::int64_t n) { t.push_back({std::move(name), {n}, Init::Norm, 0.0f}); };
  auto bias = [&](std::string name, std::int64_t n) { t.push_back({std::move(name), {n}, Init::Bias, 0.0f}); };
  auto ffn = [&](const std::string& p, const char* g, const char* u, const char* d, std::int64_t width) {
    lin(p + g + ".weight", width, H);
    lin(p + u + ".weight", width, H);
    lin(p + d + ".weight", H, width);
  };
  const float logit_sigma = 2.0f / std::sqrt(static_cast<float>(H));
  t.push_back({"model.embed_tokens.weight", {V, H}, Init::Normal, c.tie_word_embeddings ? logit_sigma : 1.0f});
  for (std::int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const std::string a = p + "self_attn.";
    norm(p + "input_layernorm.weight", H);
    lin(a + "q_proj.weight", q_out, H);
    lin(a + "k_proj.weight", kv_out, H);
    lin(a + "v_proj.weight", kv_out, H);
    lin(a + "o_proj.weight", H, q_out);
    if (c.qkv_bias) {
      bias(a + "q_proj.bias", q_out);
      bias(a + "k_proj.bias", kv_out);
      bias(a + "v_proj.bias", kv_out);
    }
    if (c.qk_norm) {
      norm(a + "q_norm.weight", c.qk_norm_per_head ? D : q_out);
      norm(a + "k_norm.weight", c.qk_norm_per_head ? D : kv_out);
    }
    norm(p + "post_attention_layernorm.weight", H);
    if (!c.is_sparse(i)) {
      ffn(p + "mlp.", "gate_proj", "up_proj", "down_proj", c.intermediate_size);
      continue;
    }
    const bool mixtral = c.arch == Arch::Mixtral;
    const std::string m = p + (mixtral ? "block_sparse_moe." : "mlp.");
    lin(m + "gate.weight", c.num_experts, H);
    for (std::int32_t e = 0; e < c.num_experts; ++e) {
      const std::string ep = m + "experts." + std::to_string(e) + ".";
      if (mixtral) ffn(ep, "w1", "w3", "w2", c.moe_intermediate_size);
      else ffn(ep, "gate_proj", "up_proj", "down_proj", c.moe_intermediate_size);
    }
    if (c.has_shared_expert()) {
      ffn(m + "shared_expert.", "gate_proj", "up_proj", "down_proj", c.shared_expert_intermediate_size);
      lin(m + "shared_expert_gate.weight", 1, H);
    }
  }
  norm("model.norm.weight", H);
  if (!c.tie_word_embeddings) t.push_back({"lm_head.weight", {V, H}, Init::Normal, logit_sigma});
  return t;
}

constexpr std::uint64_t kChunk = 1 << 16;  // values per independently seeded chunk

// Fills `n` values of chunk `chunk` of a tensor with standard normals (Marsaglia's polar
// method: one log and one square root per pair, no trigonometry).
void normal_chunk(std::uint64_t tensor_seed, std::uint64_t chunk, float* out, std::uint64_t n) {
  Xoshiro rng(tensor_seed ^ splitmix64(chunk + 1));
  std::uint64_t i = 0;
  while (i < n) {
    const std::uint64_t a = rng.next();
    // Two 24-bit uniforms in (-1, 1) from one 64-bit draw.
    const float u = static_cast<float>(static_cast<std::int32_t>(a >> 40) - (1 << 23)) * 0x1.0p-23f;
    const float v = static_cast<float>(static_cast<std::int32_t>((a >> 16) & 0xffffffu) - (1 << 23)) * 0x1.0p-23f;
    const float s = u * u + v * v;
    if (s >= 1.0f || s == 0.0f) continue;
    const float f = std::sqrt(-2.0f * std::log(s) / s);
    out[i++] = u * f;
    if (i < n) out[i++] = v * f;
  }
}

// The values of one tensor, converted to `dtype` into dst; chunks spread over threads, the
// result independent of the thread count.
void fill_tensor(const PlannedTensor& t, std::uint64_t model_seed, kernels::DType dtype, void* dst) {
  const std::uint64_t n = t.numel();
  const std::uint64_t tensor_seed = splitmix64(model_seed ^ fnv1a(t.name));
  const std::uint64_t chunks = (n + kChunk - 1) / kChunk;
  auto work = [&](std::atomic<std::uint64_t>& next) {
    std::vector<float> buf(kChunk);
    for (std::uint64_t c = next++; c < chunks; c = next++) {
      const std::uint64_t begin = c * kChunk, count = std::min(kChunk, n - begin);
      normal_chunk(tensor_seed, c, buf.data(), count);
      for (std::uint64_t i = 0; i < count; ++i) {
        float& v = buf[i];
        switch (t.init) {
          case Init::Normal: v *= t.sigma; break;
          case Init::Norm: v = 1.0f + 0.1f * v; break;
          case Init::Bias: v *= 0.1f; break;
        }
      }
      char* out = static_cast<char*>(dst) + begin * kernels::dtype_size(dtype);
      if (dtype == kernels::DType::BF16) {
        auto* o = reinterpret_cast<std::uint16_t*>(out);
        for (std::uint64_t i = 0; i < count; ++i) o[i] = kernels::f32_to_bf16(buf[i]);
      } else if (dtype == kernels::DType::F32) {
        std::memcpy(out, buf.data(), count * sizeof(float));
      } else {
        kernels::convert_from_f32(buf.data(), out, dtype, count);
      }
    }
  };
  std::atomic<std::uint64_t> next{0};
  const unsigned threads =
      static_cast<unsigned>(std::min<std::uint64_t>(chunks, std::clamp(std::thread::hardware_concurrency(), 1u, 8u)));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back(work, std::ref(next));
  work(next);
  for (auto& th : pool) th.join();
}

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return Status::Error("cannot write " + path.string());
  return Status::Ok();
}

Status write_into(const ModelConfig& c, std::uint64_t seed, const fs::path& dir, std::uint64_t shard_bytes,
                  const std::vector<ModelFile>& extra_files, const ByteProgress& progress) {
  SY_RETURN_IF_ERROR(write_text(dir / "config.json", c.to_json()));
  for (const ModelFile& f : extra_files) SY_RETURN_IF_ERROR(write_text(dir / f.name, f.content));
  const std::vector<PlannedTensor> plan = plan_tensors(c);
  const std::size_t elem = kernels::dtype_size(c.dtype);

  // Greedy sharding in model order, as transformers' save_pretrained does.
  std::vector<std::vector<std::size_t>> shards(1);
  std::uint64_t in_shard = 0, total = 0;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const std::uint64_t bytes = plan[i].numel() * elem;
    if (!shards.back().empty() && in_shard + bytes > shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += bytes;
    total += bytes;
  }

  nlohmann::json weight_map = nlohmann::json::object();
  std::uint64_t written = 0;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    std::string file = "model.safetensors";
    if (shards.size() > 1) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
      file = name;
    }
    std::vector<TensorToWrite> tensors;
    for (std::size_t i : shards[s]) {
      tensors.push_back({plan[i].name, c.dtype, plan[i].shape, nullptr});
      weight_map[plan[i].name] = file;
    }
    const auto& ids = shards[s];
    SY_RETURN_IF_ERROR(write_safetensors_streamed(dir / file, tensors, [&](std::size_t k, void* dst, std::size_t nbytes) {
      fill_tensor(plan[ids[k]], seed, c.dtype, dst);
      written += nbytes;
      if (progress) progress(written, total);
      return Status::Ok();
    }));
  }
  if (shards.size() > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    SY_RETURN_IF_ERROR(write_text(dir / "model.safetensors.index.json", index.dump(2) + "\n"));
  }
  return Status::Ok();
}

}  // namespace

Status write_random_model(const ModelConfig& config, std::uint64_t seed, const fs::path& dir,
                          std::uint64_t shard_bytes, const std::vector<ModelFile>& extra_files,
                          const ByteProgress& progress) {
  if (config.shapes_only())
    return Status::Error(arch_name(config.arch) + ": shapes only (simulator); writing weights is not supported");
  if (config.sparse_layers.size() != static_cast<std::size_t>(config.num_layers))
    return Status::Error("invalid model config: sparse_layers does not have num_layers entries");
  if (config.arch == Arch::Mixtral || config.arch == Arch::Olmoe)
    for (bool s : config.sparse_layers)
      if (!s) return Status::Error("invalid model config: every " + arch_name(config.arch) + " layer is sparse");
  {
    // The config must read back as itself: validates sizes, head/kv-head divisibility, top-k.
    auto check = ModelConfig::from_json(config.to_json(), "the config.json to write");
    if (!check.ok()) return Status::Error("invalid model config: " + check.status().message());
  }

  fs::path target = dir;
  if (target.filename().empty()) target = target.parent_path();
  if (target.empty()) return Status::Error("no output directory given");
  std::error_code ec;
  if (fs::exists(target, ec)) {
    if (!fs::is_directory(target, ec)) return Status::Error("output path " + target.string() + " is not a directory");
    if (!fs::is_empty(target, ec)) return Status::Error("output directory " + target.string() + " is not empty");
  }
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  fs::create_directories(parent, ec);
  if (ec) return Status::Error("cannot create " + parent.string() + ": " + ec.message());

  static std::atomic<unsigned> counter{0};
  const fs::path tmp = parent / (target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                                 std::to_string(counter++));
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec) || ec)
    return Status::Error("cannot create " + tmp.string() + ": " + (ec ? ec.message() : "already exists"));

  Status s = write_into(config, seed, tmp, shard_bytes, extra_files, progress);
  if (s.ok()) {
    // rename(2) replaces an empty directory; a non-empty one (created meanwhile) is an error.
    fs::rename(tmp, target, ec);
    if (ec) s = Status::Error("cannot move " + tmp.string() + " to " + target.string() + ": " + ec.message());
  }
  if (!s.ok()) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    return s.with_context("writing a random model to " + target.string());
  }
  return Status::Ok();
}

}  // namespace sy
