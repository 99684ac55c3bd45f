// ModelWeights::load on random models of every architecture written by write_random_model, and
// on checkpoints edited to be wrong (missing tensor, wrong shape, bad config), plus the rules of
// writing a random model (determinism, sharding, output directory).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "engine/model/checkpoint.h"
#include "engine/model/model_weights.h"
#include "engine/model/random_model.h"
#include "engine/model/safetensors.h"
#include "tests/model/model_test_util.h"

namespace sy {
namespace {

namespace fs = std::filesystem;
using kernels::DType;
using nlohmann::json;
using testing_util::FailsWith;
using testing_util::read_file;
using testing_util::TempDir;
using testing_util::write_file;

// One tensor copied out of a file, to be edited and written again.
struct OwnedTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;
  std::vector<char> bytes;
};

std::vector<OwnedTensor> read_all(const fs::path& path) {
  std::vector<OwnedTensor> out;
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return out;
  for (const auto& [name, info] : (*file)->tensors()) {
    const char* p = static_cast<const char*>(info.data);
    out.push_back({name, info.dtype, info.shape, std::vector<char>(p, p + info.nbytes)});
  }
  return out;
}

void write_all(const fs::path& path, const std::vector<OwnedTensor>& tensors) {
  std::vector<TensorToWrite> w;
  for (const auto& t : tensors) w.push_back({t.name, t.dtype, t.shape, t.bytes.data()});
  ASSERT_TRUE(write_safetensors(path, w).ok());
}

OwnedTensor* find(std::vector<OwnedTensor>& tensors, const std::string& name) {
  for (auto& t : tensors)
    if (t.name == name) return &t;
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

float value_at(const void* data, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::F32: return static_cast<const float*>(data)[i];
    case DType::BF16: return kernels::bf16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
    case DType::F16: return kernels::f16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
  }
  return 0;
}

struct Stats {
  double mean = 0, stddev = 0;
};
Stats stats(const void* data, DType dtype, std::int64_t n) {
  double s = 0, s2 = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = value_at(data, dtype, i);
    s += v;
    s2 += v * v;
  }
  Stats r;
  r.mean = s / static_cast<double>(n);
  r.stddev = std::sqrt(std::max(0.0, s2 / static_cast<double>(n) - r.mean * r.mean));
  return r;
}

void expect_matrix(const kernels::WeightView& w, std::int64_t rows, std::int64_t cols, DType dtype) {
  EXPECT_NE(w.data, nullptr);
  EXPECT_EQ(w.rows, rows);
  EXPECT_EQ(w.cols, cols);
  EXPECT_EQ(w.dtype, dtype);
}

void expect_ffn(const FfnWeights& f, std::int64_t hidden, std::int64_t width, DType dtype) {
  expect_matrix(f.gate, width, hidden, dtype);
  expect_matrix(f.up, width, hidden, dtype);
  expect_matrix(f.down, hidden, width, dtype);
}

class RandomModel : public ::testing::TestWithParam<std::tuple<Arch, DType>> {};

TEST_P(RandomModel, WritesAndLoadsTiny) {
  const auto [arch, dtype] = GetParam();
  TempDir tmp;
  const fs::path dir = tmp / "model";
  const ModelConfig config = preset_config(arch, ModelPreset::Tiny, dtype);
  ASSERT_TRUE(write_random_model(config, 11, dir).ok());
  EXPECT_TRUE(fs::exists(dir / "config.json"));
  EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "model.safetensors.index.json"));

  auto loaded = ModelWeights::load(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const ModelWeights& w = **loaded;
  const ModelConfig& c = w.config();
  EXPECT_EQ(w.dir(), dir);
  EXPECT_EQ(c.arch, arch);
  EXPECT_EQ(c.dtype, dtype);
  EXPECT_EQ(c.parameter_count(), config.parameter_count());
  EXPECT_EQ(c.sparse_layers, config.sparse_layers);

  const std::int64_t V = c.vocab_size, H = c.hidden_size, D = c.head_dim;
  expect_matrix(w.embed_tokens(), V, H, dtype);
  expect_matrix(w.lm_head(), V, H, dtype);
  EXPECT_EQ(w.lm_head().data == w.embed_tokens().data, c.tie_word_embeddings);
  EXPECT_EQ(w.final_norm().size, H);
  EXPECT_EQ(w.final_norm().dtype, dtype);

  // Initialisation scales: what keeps activations O(1) and logits at std ~2.
  const double embed_sigma = c.tie_word_embeddings ? 2.0 / std::sqrt(H) : 1.0;
  EXPECT_NEAR(stats(w.embed_tokens().data, dtype, V * H).stddev, embed_sigma, 0.05 * embed_sigma);
  EXPECT_NEAR(stats(w.embed_tokens().data, dtype, V * H).mean, 0.0, 0.05 * embed_sigma);
  if (!c.tie_word_embeddings) {
    EXPECT_NEAR(stats(w.lm_head().data, dtype, V * H).stddev, 2.0 / std::sqrt(H), 0.1 / std::sqrt(H));
  }
  const Stats norm = stats(w.final_norm().data, dtype, H);
  EXPECT_NEAR(norm.mean, 1.0, 0.05);
  EXPECT_NEAR(norm.stddev, 0.1, 0.03);

  for (std::int32_t i = 0; i < c.num_layers; ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const LayerWeights& L = w.layer(i);
    EXPECT_EQ(L.input_norm.size, H);
    EXPECT_EQ(L.post_attention_norm.size, H);
    expect_matrix(L.q_proj, c.num_heads * D, H, dtype);
    expect_matrix(L.k_proj, c.num_kv_heads * D, H, dtype);
    expect_matrix(L.v_proj, c.num_kv_heads * D, H, dtype);
    expect_matrix(L.o_proj, H, c.num_heads * D, dtype);
    EXPECT_NEAR(stats(L.q_proj.data, dtype, L.q_proj.numel()).stddev, 1.0 / std::sqrt(H), 0.1 / std::sqrt(H));
    EXPECT_EQ(L.q_bias != nullptr, arch == Arch::Qwen2Moe);
    EXPECT_EQ(L.k_bias != nullptr, arch == Arch::Qwen2Moe);
    EXPECT_EQ(L.v_bias != nullptr, arch == Arch::Qwen2Moe);
    EXPECT_EQ(!L.q_norm.empty(), arch == Arch::Qwen3Moe || arch == Arch::Olmoe);
    EXPECT_EQ(!L.k_norm.empty(), arch == Arch::Qwen3Moe || arch == Arch::Olmoe);
    if (arch == Arch::Qwen3Moe) {
      EXPECT_EQ(L.q_norm.size, D);
      EXPECT_EQ(L.k_norm.size, D);
    }
    if (arch == Arch::Olmoe) {  // over each whole projection
      EXPECT_EQ(L.q_norm.size, c.num_heads * D);
      EXPECT_EQ(L.k_norm.size, c.num_kv_heads * D);
    }
    EXPECT_EQ(L.sparse, c.is_sparse(i));
    if (!L.sparse) {
      expect_ffn(L.dense_mlp, H, c.intermediate_size, dtype);
      EXPECT_TRUE(L.experts.empty());
      EXPECT_TRUE(L.router.empty());
      continue;
    }
    EXPECT_TRUE(L.dense_mlp.empty());
    expect_matrix(L.router, c.num_experts, H, dtype);
    ASSERT_EQ(L.experts.size(), static_cast<std::size_t>(c.num_experts));
    for (const FfnWeights& e : L.experts) expect_ffn(e, H, c.moe_intermediate_size, dtype);
    EXPECT_NEAR(stats(L.experts[3].down.data, dtype, L.experts[3].down.numel()).stddev,
                1.0 / std::sqrt(c.moe_intermediate_size), 0.1 / std::sqrt(c.moe_intermediate_size));
    EXPECT_EQ(!L.shared_expert.empty(), arch == Arch::Qwen2Moe);
    if (arch == Arch::Qwen2Moe) {
      expect_ffn(L.shared_expert, H, c.shared_expert_intermediate_size, dtype);
      expect_matrix(L.shared_expert_gate, 1, H, dtype);
    }
  }
  // Every arch's tiny preset covers its paths: Mixtral and OLMoE all sparse, Qwen a dense layer.
  EXPECT_EQ(w.layer(0).sparse, arch == Arch::Mixtral || arch == Arch::Olmoe);
}

INSTANTIATE_TEST_SUITE_P(Archs, RandomModel,
                         ::testing::Combine(::testing::Values(Arch::Mixtral, Arch::Qwen2Moe, Arch::Qwen3Moe, Arch::Olmoe),
                                            ::testing::Values(DType::BF16, DType::F32)),
                         [](const auto& p) {
                           return arch_name(std::get<0>(p.param)) +
                                  (std::get<1>(p.param) == DType::BF16 ? "_bf16" : "_f32");
                         });

TEST(RandomModelWriter, DeterministicPerSeed) {
  TempDir tmp;
  const ModelConfig c = preset_config(Arch::Qwen2Moe, ModelPreset::Tiny, DType::BF16);
  ASSERT_TRUE(write_random_model(c, 5, tmp / "a").ok());
  ASSERT_TRUE(write_random_model(c, 5, tmp / "b").ok());
  ASSERT_TRUE(write_random_model(c, 6, tmp / "c").ok());
  EXPECT_EQ(read_file(tmp / "a/config.json"), read_file(tmp / "b/config.json"));
  EXPECT_EQ(read_file(tmp / "a/model.safetensors"), read_file(tmp / "b/model.safetensors"));
  EXPECT_NE(read_file(tmp / "a/model.safetensors"), read_file(tmp / "c/model.safetensors"));

  // Tensors differ from one another too (per-tensor seeds), not just between seeds.
  auto a = ModelWeights::load(tmp / "a");
  ASSERT_TRUE(a.ok()) << a.status().message();
  const auto& L = (*a)->layer(1);
  EXPECT_NE(std::memcmp(L.experts[0].gate.data, L.experts[1].gate.data, 64), 0);
  EXPECT_NE(std::memcmp(L.q_proj.data, L.o_proj.data, 64), 0);
  // Biases are float32 copies of the stored values.
  auto ckpt = Checkpoint::open(tmp / "a");
  ASSERT_TRUE(ckpt.ok());
  const TensorInfo* kb = (*ckpt)->find("model.layers.1.self_attn.k_proj.bias");
  ASSERT_NE(kb, nullptr);
  for (std::int64_t i = 0; i < kb->shape[0]; ++i) EXPECT_EQ(L.k_bias[i], value_at(kb->data, DType::BF16, i));
}

TEST(RandomModelWriter, ShardsWithIndex) {
  TempDir tmp;
  const ModelConfig c = preset_config(Arch::Mixtral, ModelPreset::Tiny, DType::BF16);
  ASSERT_TRUE(write_random_model(c, 3, tmp / "one").ok());
  ASSERT_TRUE(write_random_model(c, 3, tmp / "sharded", /*shard_bytes=*/1 << 20).ok());
  EXPECT_FALSE(fs::exists(tmp / "sharded/model.safetensors"));
  const json index = json::parse(read_file(tmp / "sharded/model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 2 * c.parameter_count());
  std::set<std::string> files;
  for (const auto& [name, file] : index["weight_map"].items()) files.insert(file.get<std::string>());
  EXPECT_EQ(index["weight_map"].size(), (*Checkpoint::open(tmp / "one"))->tensor_count());
  const std::size_t shards = files.size();
  EXPECT_GE(shards, 4u);  // 3.8 MB in 1 MiB shards
  for (std::size_t k = 1; k <= shards; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k, shards);
    EXPECT_TRUE(files.count(name)) << name;
    EXPECT_TRUE(fs::exists(tmp / "sharded" / name)) << name;
    if (k == 1) {
      EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"], name);
    }
  }
  for (const auto& entry : fs::directory_iterator(tmp / "sharded")) {
    if (entry.path().extension() == ".safetensors") {
      EXPECT_LE(fs::file_size(entry.path()), (1u << 20) + 65536) << entry.path();
    }
  }

  auto one = ModelWeights::load(tmp / "one");
  auto sharded = ModelWeights::load(tmp / "sharded");
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_TRUE(sharded.ok()) << sharded.status().message();
  auto same = [](const kernels::WeightView& a, const kernels::WeightView& b) {
    return a.numel() == b.numel() && std::memcmp(a.data, b.data, static_cast<std::size_t>(a.numel()) * 2) == 0;
  };
  EXPECT_TRUE(same((*one)->embed_tokens(), (*sharded)->embed_tokens()));
  EXPECT_TRUE(same((*one)->lm_head(), (*sharded)->lm_head()));
  for (std::int32_t i = 0; i < c.num_layers; ++i) {
    EXPECT_TRUE(same((*one)->layer(i).q_proj, (*sharded)->layer(i).q_proj));
    EXPECT_TRUE(same((*one)->layer(i).experts[7].down, (*sharded)->layer(i).experts[7].down));
  }
}

TEST(RandomModelWriter, OutputDirectoryRules) {
  TempDir tmp;
  const ModelConfig c = preset_config(Arch::Mixtral, ModelPreset::Tiny, DType::BF16);
  // A non-empty directory is refused and left alone.
  fs::create_directories(tmp / "full");
  write_file(tmp / "full/keep.txt", "x");
  EXPECT_TRUE(FailsWith(write_random_model(c, 0, tmp / "full"), {(tmp / "full").string(), "not empty"}));
  EXPECT_EQ(read_file(tmp / "full/keep.txt"), "x");
  // A file in the way is refused.
  write_file(tmp / "file", "x");
  EXPECT_TRUE(FailsWith(write_random_model(c, 0, tmp / "file"), {(tmp / "file").string(), "not a directory"}));
  // An existing empty directory is filled; missing parents are created; a trailing slash is fine.
  fs::create_directories(tmp / "empty");
  EXPECT_TRUE(write_random_model(c, 0, tmp / "empty").ok());
  EXPECT_TRUE(write_random_model(c, 0, tmp.path() / "deep/er/").ok());
  EXPECT_TRUE(ModelWeights::load(tmp / "deep/er").ok());
  // An invalid config writes nothing.
  ModelConfig bad = c;
  bad.num_kv_heads = 3;
  EXPECT_TRUE(FailsWith(write_random_model(bad, 0, tmp / "bad"), {"num_key_value_heads"}));
  EXPECT_FALSE(fs::exists(tmp / "bad"));
  // No temporary directories are left behind.
  for (const auto& entry : fs::directory_iterator(tmp.path()))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

// A tiny model written into tmp/"model" whose tensors the test then edits.
class EditedModel : public ::testing::Test {
 protected:
  void write(Arch arch, DType dtype = DType::BF16) {
    dir_ = tmp_ / "model";
    ASSERT_TRUE(write_random_model(preset_config(arch, ModelPreset::Tiny, dtype), 1, dir_).ok());
    tensors_ = read_all(dir_ / "model.safetensors");
  }
  void save() { write_all(dir_ / "model.safetensors", tensors_); }
  void erase(const std::string& name) {
    std::erase_if(tensors_, [&](const OwnedTensor& t) { return t.name == name; });
  }
  void edit_config(const std::function<void(json&)>& f) {
    json j = json::parse(read_file(dir_ / "config.json"));
    f(j);
    write_file(dir_ / "config.json", j.dump());
  }

  TempDir tmp_;
  fs::path dir_;
  std::vector<OwnedTensor> tensors_;
};

TEST_F(EditedModel, MissingTensor) {
  write(Arch::Mixtral);
  erase("model.layers.1.block_sparse_moe.experts.5.w3.weight");
  save();
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_),
                        {"tensor 'model.layers.1.block_sparse_moe.experts.5.w3.weight' not found in " + dir_.string()}));
}

TEST_F(EditedModel, MissingLmHeadWhenUntied) {
  write(Arch::Qwen2Moe);
  erase("lm_head.weight");
  save();
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_), {"'lm_head.weight'", dir_.string()}));
}

TEST_F(EditedModel, ShapeMismatchNamesBothShapes) {
  write(Arch::Qwen2Moe);
  OwnedTensor* q = find(tensors_, "model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  q->shape = {64, 256};  // same byte count, wrong shape
  save();
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_),
                        {"tensor 'model.layers.0.self_attn.q_proj.weight' has shape [64, 256] in " +
                             (dir_ / "model.safetensors").string() + " but config.json implies [128, 128]"}));

  // A config that disagrees with the file is caught the same way.
  q->shape = {128, 128};
  save();
  edit_config([](json& j) { j["vocab_size"] = 500; });
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_),
                        {"'model.embed_tokens.weight'", "[512, 128]", "[500, 128]"}));
  edit_config([](json& j) {
    j["vocab_size"] = 512;
    j["num_experts"] = 9;
  });
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_), {"'model.layers.1.mlp.gate.weight'", "[8, 128]", "[9, 128]"}));
  edit_config([](json& j) {
    j["num_experts"] = 8;
    j["shared_expert_intermediate_size"] = 128;
  });
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_),
                        {"'model.layers.1.mlp.shared_expert.gate_proj.weight'", "[256, 128]", "[128, 128]"}));
}

TEST_F(EditedModel, BiasShapeAndVectorShape) {
  write(Arch::Qwen2Moe);
  OwnedTensor* b = find(tensors_, "model.layers.2.self_attn.v_proj.bias");
  ASSERT_NE(b, nullptr);
  b->shape = {32, 2};
  save();
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_), {"'model.layers.2.self_attn.v_proj.bias'", "[32, 2]", "[64]"}));
}

TEST_F(EditedModel, Qwen3NeedsQkNorm) {
  write(Arch::Qwen3Moe);
  erase("model.layers.3.self_attn.k_norm.weight");
  save();
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_), {"'model.layers.3.self_attn.k_norm.weight'", "not found"}));
}

TEST_F(EditedModel, TiedEmbeddingsPreferStoredLmHead) {
  write(Arch::Qwen3Moe);
  {
    auto w = ModelWeights::load(dir_);
    ASSERT_TRUE(w.ok()) << w.status().message();
    EXPECT_TRUE((*w)->config().tie_word_embeddings);
    EXPECT_EQ((*w)->lm_head().data, (*w)->embed_tokens().data);  // no lm_head.weight: tied
  }
  const OwnedTensor* embed = find(tensors_, "model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  OwnedTensor lm = *embed;
  lm.name = "lm_head.weight";
  std::fill(lm.bytes.begin(), lm.bytes.end(), 0);
  tensors_.push_back(lm);
  save();
  // transformers 5 leaves a stored lm_head.weight that differs from the embedding untied and
  // uses it, tie_word_embeddings notwithstanding.
  auto w = ModelWeights::load(dir_);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_NE((*w)->lm_head().data, (*w)->embed_tokens().data);
  EXPECT_EQ(value_at((*w)->lm_head().data, DType::BF16, 5), 0.0f);

  // Its shape is checked like any other tensor's.
  find(tensors_, "lm_head.weight")->shape = {256, 256};
  save();
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_), {"'lm_head.weight'", "[256, 256]", "[512, 128]"}));
}

TEST_F(EditedModel, MixedDtypesAndUnusedTensors) {
  write(Arch::Qwen2Moe, DType::F32);
  // Re-encode some tensors as BF16 and F16; add a tensor the model does not use.
  for (OwnedTensor& t : tensors_) {
    const bool to_f16 = t.name.find("bias") != std::string::npos || t.name == "model.norm.weight";
    const bool to_bf16 = t.name.find("layers.1.") != std::string::npos && !to_f16;
    if (!to_f16 && !to_bf16) continue;
    const std::size_t n = t.bytes.size() / 4;
    std::vector<char> out(n * 2);
    for (std::size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, t.bytes.data() + 4 * i, 4);
      const std::uint16_t h = to_f16 ? kernels::f32_to_f16(f) : kernels::f32_to_bf16(f);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
    t.bytes = std::move(out);
    t.dtype = to_f16 ? DType::F16 : DType::BF16;
  }
  tensors_.push_back({"model.rotary_emb.inv_freq", DType::F32, {2}, std::vector<char>(8, 0)});
  save();

  auto w = ModelWeights::load(dir_);
  ASSERT_TRUE(w.ok()) << w.status().message();
  EXPECT_EQ((*w)->embed_tokens().dtype, DType::F32);
  EXPECT_EQ((*w)->final_norm().dtype, DType::F16);
  EXPECT_EQ((*w)->layer(1).q_proj.dtype, DType::BF16);
  EXPECT_EQ((*w)->layer(1).experts[2].down.dtype, DType::BF16);
  EXPECT_EQ((*w)->layer(2).q_proj.dtype, DType::F32);
  const OwnedTensor* qb = find(tensors_, "model.layers.2.self_attn.q_proj.bias");
  ASSERT_NE(qb, nullptr);
  for (std::int64_t i = 0; i < 128; ++i)
    EXPECT_EQ((*w)->layer(2).q_bias[i], value_at(qb->bytes.data(), DType::F16, i)) << i;
}

// Rewrites a safetensors file's header through `edit`, which may also append to its data section
// (offsets stay relative to it); the header is padded again so the data starts 8-byte aligned.
void edit_safetensors(const fs::path& path, const std::function<void(json&, std::string&)>& edit) {
  const std::string bytes = read_file(path);
  std::uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  json header = json::parse(bytes.substr(8, len));
  std::string data = bytes.substr(8 + len);
  edit(header, data);
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::string out(8, '\0');
  const std::uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  write_file(path, out + text + data);
}

// Appends an unused tensor of `dtype` with `bytes` of data, aligned to 8 bytes.
void add_raw_tensor(const fs::path& path, const std::string& name, const std::string& dtype,
                    std::vector<std::int64_t> shape, const std::string& bytes) {
  edit_safetensors(path, [&](json& header, std::string& data) {
    data.resize((data.size() + 7) / 8 * 8, '\0');
    header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data += bytes;
  });
}

// transformers loads a checkpoint carrying buffers it does not use as weights (an I64 index, a
// stale float buffer); so does the engine, whatever their dtype and values.
TEST_F(EditedModel, UnusedTensorsOfAnyDtypeOrValueAreIgnored) {
  write(Arch::Mixtral, DType::F32);
  const fs::path file = dir_ / "model.safetensors";
  add_raw_tensor(file, "model.rotary_emb.inv_freq_extra", "I64", {4}, std::string(32, '\x7f'));
  add_raw_tensor(file, "model.unused.mask", "BOOL", {3}, std::string(3, '\1'));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  add_raw_tensor(file, "model.unused.stale", "F32", {1}, std::string(reinterpret_cast<const char*>(&nan), 4));
  for (WeightCheck check : {WeightCheck::Sampled, WeightCheck::Full}) {
    auto w = ModelWeights::load(dir_, check);
    ASSERT_TRUE(w.ok()) << w.status().message();
  }
  // Progress counts the bytes of the tensors the model reads, not of those it ignores.
  std::uint64_t last_done = 0, last_total = 0;
  ASSERT_TRUE(ModelWeights::load(dir_, WeightCheck::Sampled, [&](std::uint64_t done, std::uint64_t total) {
                last_done = done;
                last_total = total;
              }).ok());
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(last_total, static_cast<std::uint64_t>(
                            preset_config(Arch::Mixtral, ModelPreset::Tiny, DType::F32).parameter_count() * 4));
}

// A tensor the model computes with must be F32, F16 or BF16: another dtype is named.
TEST_F(EditedModel, UsedTensorOfAnotherDtypeIsNamed) {
  write(Arch::Mixtral, DType::F32);
  edit_safetensors(dir_ / "model.safetensors",
                   [](json& header, std::string&) { header["model.norm.weight"]["dtype"] = "I32"; });
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_),
                        {"'model.norm.weight'", "model.safetensors", "dtype I32", "F32, F16, BF16"}));
}

TEST_F(EditedModel, BadConfigAndFiles) {
  write(Arch::Mixtral);
  const std::string config = (dir_ / "config.json").string();
  edit_config([](json& j) { j["model_type"] = "llama"; });
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_), {"unsupported model_type 'llama'", config}));
  edit_config([](json& j) {
    j["model_type"] = "mixtral";
    j.erase("num_hidden_layers");
  });
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_), {"missing required key 'num_hidden_layers'", config}));
  fs::remove(dir_ / "config.json");
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir_), {"config.json", dir_.string()}));
  EXPECT_TRUE(FailsWith(ModelWeights::load(tmp_ / "nowhere"), {(tmp_ / "nowhere").string(), "does not exist"}));

  // Checkpoint errors come through load.
  ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, DType::BF16), 1, tmp_ / "m2").ok());
  const std::string st = (tmp_ / "m2/model.safetensors").string();
  const std::string bytes = read_file(st);
  write_file(st, bytes.substr(0, bytes.size() / 2));
  EXPECT_TRUE(FailsWith(ModelWeights::load(tmp_ / "m2"), {st, "truncated"}));
  fs::remove(st);
  EXPECT_TRUE(FailsWith(ModelWeights::load(tmp_ / "m2"), {"no model.safetensors or model.safetensors.index.json"}));
}

TEST(ModelWeights, SharedOwnershipOutlivesLoader) {
  TempDir tmp;
  ASSERT_TRUE(write_random_model(preset_config(Arch::Qwen2Moe, ModelPreset::Tiny, DType::BF16), 2, tmp / "m").ok());
  std::shared_ptr<const ModelWeights> keep;
  {
    auto w = ModelWeights::load(tmp / "m");
    ASSERT_TRUE(w.ok());
    keep = *w;
  }
  // The mapping and the converted biases live as long as the object.
  EXPECT_TRUE(std::isfinite(keep->layer(3).v_bias[5]));
  EXPECT_TRUE(std::isfinite(value_at(keep->layer(3).shared_expert.down.row(127), DType::BF16, 255)));
}

}  // namespace
// A NaN in a checkpoint is an error naming the tensor, found by the sampled check when it sits
// on a sampled element and always by the full one; the engine never serves NaN logits silently.
TEST(WeightCheck, NonFiniteWeightsAreFoundAndNamed) {
  TempDir tmp;
  ModelConfig c = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32);
  const std::filesystem::path dir = tmp / "m";
  ASSERT_TRUE(write_random_model(c, 4, dir).ok());
  ASSERT_TRUE(ModelWeights::load(dir).ok());
  // Where the embedding's elements live in the file: after the header, at its data offset.
  std::int64_t offset = 0;
  {
    std::ifstream in(dir / "model.safetensors", std::ios::binary);
    std::uint64_t header = 0;
    in.read(reinterpret_cast<char*>(&header), 8);
    std::string text(header, '\0');
    in.read(text.data(), static_cast<std::streamsize>(header));
    const auto j = json::parse(text);
    offset = 8 + static_cast<std::int64_t>(header) + j["model.embed_tokens.weight"]["data_offsets"][0].get<std::int64_t>();
  }
  auto poke = [&](std::int64_t element, float value) {
    std::fstream f(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(offset + element * 4);
    f.write(reinterpret_cast<const char*>(&value), 4);
  };
  // Element 1 is not among the sampled ones of a tensor this large; element 0 is.
  poke(1, std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(ModelWeights::load(dir, WeightCheck::Sampled).ok());
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir, WeightCheck::Full),
                        {"model.embed_tokens.weight", "model.safetensors", "NaN", "element 1 of", "corrupt"}));
  EXPECT_TRUE(ModelWeights::load(dir, WeightCheck::Off).ok());
  poke(1, 0.5f);
  poke(0, -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(FailsWith(ModelWeights::load(dir), {"model.embed_tokens.weight", "-inf", "element 0 of"}));
}

// A FIFO where a weight file should be would block the loader forever; a shard path that leaves
// the model directory is refused.
TEST(Checkpoint, SpecialFilesAndShardsOutsideTheDirectoryAreRefused) {
  TempDir tmp;
  const std::filesystem::path dir = tmp / "fifo";
  std::filesystem::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir / "model.safetensors").c_str(), 0600), 0);
  EXPECT_TRUE(FailsWith(Checkpoint::open(dir), {"model.safetensors", "not a regular file"}));

  const std::filesystem::path indexed = tmp / "indexed";
  std::filesystem::create_directories(indexed);
  ASSERT_EQ(::mkfifo((indexed / "model.safetensors.index.json").c_str(), 0600), 0);
  EXPECT_TRUE(FailsWith(Checkpoint::open(indexed), {"model.safetensors.index.json", "not a regular file"}));
  std::filesystem::remove(indexed / "model.safetensors.index.json");
  std::ofstream(indexed / "model.safetensors.index.json") << R"({"weight_map": {"a": "../elsewhere/s.safetensors"}})";
  EXPECT_TRUE(FailsWith(Checkpoint::open(indexed), {"'../elsewhere/s.safetensors'", "outside the model directory"}));
}

// A broken symbolic link is named as one, not reported as no weights at all; a shard that exists
// but is no regular file (a FIFO, the directory itself) is not said to be missing.
TEST(Checkpoint, BrokenLinksAndShardsThatAreNoFilesAreNamed) {
  TempDir tmp;
  const std::filesystem::path dangling = tmp / "dangling";
  std::filesystem::create_directories(dangling);
  std::filesystem::create_symlink(tmp / "gone.safetensors", dangling / "model.safetensors");
  auto r = Checkpoint::open(dangling);
  EXPECT_TRUE(FailsWith(r, {(dangling / "model.safetensors").string(), "symbolic link to " +
                            (tmp / "gone.safetensors").string(), "does not exist"}));
  EXPECT_FALSE(FailsWith(r, {"no model.safetensors"}));

  const std::filesystem::path index_link = tmp / "index_link";
  std::filesystem::create_directories(index_link);
  std::filesystem::create_symlink(tmp / "gone.json", index_link / "model.safetensors.index.json");
  EXPECT_TRUE(FailsWith(Checkpoint::open(index_link), {"model.safetensors.index.json", "symbolic link", "does not exist"}));

  const std::filesystem::path shards = tmp / "shards";
  std::filesystem::create_directories(shards);
  const auto index_naming = [&](const std::string& shard) {
    std::ofstream(shards / "model.safetensors.index.json") << R"({"weight_map": {"w": ")" << shard << R"("}})";
    return Checkpoint::open(shards);
  };
  ASSERT_EQ(::mkfifo((shards / "fifo.safetensors").c_str(), 0600), 0);
  EXPECT_TRUE(FailsWith(index_naming("fifo.safetensors"), {"'fifo.safetensors'", "is not a regular file"}));
  EXPECT_TRUE(FailsWith(index_naming("."), {"shard '.'", "is not a regular file"}));
  std::filesystem::create_symlink(tmp / "gone.safetensors", shards / "link.safetensors");
  EXPECT_TRUE(FailsWith(index_naming("link.safetensors"), {"'link.safetensors'", "symbolic link", "does not exist"}));
  EXPECT_TRUE(FailsWith(index_naming("absent.safetensors"), {"'absent.safetensors'", "does not exist"}));
  // A link to a good file still loads (the Hugging Face cache links every file to a blob).
  const float one = 1;
  ASSERT_TRUE(write_safetensors(tmp / "blob", {{"w", DType::F32, {1}, &one}}).ok());
  std::filesystem::create_symlink(tmp / "blob", shards / "cached.safetensors");
  auto ok = index_naming("cached.safetensors");
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

}  // namespace sy
