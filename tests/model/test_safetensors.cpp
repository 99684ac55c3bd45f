// safetensors reading/writing and the checkpoint directory layouts (single file, sharded index),
// including every malformed-file error and its message.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/checkpoint.h"
#include "engine/model/safetensors.h"
#include "tests/model/model_test_util.h"

namespace sy {
namespace {

namespace fs = std::filesystem;
using kernels::DType;
using nlohmann::json;
using testing_util::FailsWith;
using testing_util::raw_safetensors;
using testing_util::TempDir;
using testing_util::write_file;

std::string bytes_of(const void* p, std::size_t n) { return std::string(static_cast<const char*>(p), n); }

TEST(Safetensors, RoundTripAllDtypes) {
  TempDir dir;
  const std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
  const std::vector<std::uint16_t> bf16 = {0x3f80, 0xc000, 0x4049};             // 1, -2, 3.140625
  const std::vector<std::uint16_t> f16 = {0x3c00, 0xc000, 0x4248, 0x0001, 0x7bff};  // 1, -2, 3.14, tiny, max
  const float scalar = 42.0f;
  const std::vector<TensorToWrite> tensors = {
      {"b.bf16", DType::BF16, {3}, bf16.data()},
      {"a.f32", DType::F32, {2, 3}, f32.data()},
      {"c.f16", DType::F16, {5, 1}, f16.data()},
      {"d.scalar", DType::F32, {}, &scalar},
      {"e.empty", DType::BF16, {0, 4}, nullptr},
  };
  const fs::path path = dir / "t.safetensors";
  ASSERT_TRUE(write_safetensors(path, tensors).ok());
  EXPECT_FALSE(fs::exists(dir / "t.safetensors.tmp"));

  // Header: 8-byte aligned data start, __metadata__ {"format": "pt"}, sorted keys.
  const std::string raw = testing_util::read_file(path);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(raw[static_cast<std::size_t>(i)]);
  EXPECT_EQ((8 + n) % 8, 0u);
  const json header = json::parse(raw.substr(8, n));
  EXPECT_EQ(header["__metadata__"], json({{"format", "pt"}}));
  EXPECT_EQ(header["a.f32"]["dtype"], "F32");
  EXPECT_EQ(header["a.f32"]["shape"], json({2, 3}));
  std::vector<std::string> keys;
  for (const auto& [k, v] : header.items()) keys.push_back(k);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ((*file)->path(), path);
  EXPECT_EQ((*file)->tensors().size(), 5u);
  EXPECT_EQ((*file)->find("__metadata__"), nullptr);
  EXPECT_EQ((*file)->find("missing"), nullptr);

  const TensorInfo* a = (*file)->find("a.f32");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::F32);
  EXPECT_EQ(a->shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(a->nbytes, 24u);
  EXPECT_EQ(a->file, path);
  EXPECT_EQ(bytes_of(a->data, a->nbytes), bytes_of(f32.data(), 24));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a->data) % 4, 0u);

  const TensorInfo* b = (*file)->find("b.bf16");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::BF16);
  EXPECT_EQ(bytes_of(b->data, b->nbytes), bytes_of(bf16.data(), 6));
  EXPECT_FLOAT_EQ(kernels::bf16_to_f32(static_cast<const std::uint16_t*>(b->data)[2]), 3.140625f);

  const TensorInfo* c = (*file)->find("c.f16");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dtype, DType::F16);
  EXPECT_EQ(c->shape, (std::vector<std::int64_t>{5, 1}));
  EXPECT_EQ(bytes_of(c->data, c->nbytes), bytes_of(f16.data(), 10));

  const TensorInfo* d = (*file)->find("d.scalar");
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->shape.empty());
  EXPECT_EQ(*static_cast<const float*>(d->data), 42.0f);

  const TensorInfo* e = (*file)->find("e.empty");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->nbytes, 0u);
  EXPECT_EQ(e->shape, (std::vector<std::int64_t>{0, 4}));
}

TEST(Safetensors, StreamedWriteMatchesBufferedWrite) {
  TempDir dir;
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  std::vector<std::uint16_t> y(333);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::uint16_t>(i * 7);
  const std::vector<TensorToWrite> tensors = {{"x", DType::F32, {10, 100}, x.data()},
                                              {"y", DType::BF16, {333}, y.data()}};
  ASSERT_TRUE(write_safetensors(dir / "a.safetensors", tensors).ok());
  ASSERT_TRUE(write_safetensors_streamed(dir / "b.safetensors", tensors, [&](std::size_t i, void* dst, std::size_t n) {
                std::memcpy(dst, tensors[i].data, n);
                return Status::Ok();
              }).ok());
  EXPECT_EQ(testing_util::read_file(dir / "a.safetensors"), testing_util::read_file(dir / "b.safetensors"));

  // A failing producer leaves no file behind.
  const Status s = write_safetensors_streamed(dir / "c.safetensors", tensors, [](std::size_t, void*, std::size_t) {
    return Status::Error("producer failed");
  });
  EXPECT_TRUE(FailsWith(s, {"producer failed"}));
  EXPECT_FALSE(fs::exists(dir / "c.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "c.safetensors.tmp"));
}

TEST(Safetensors, WriteErrors) {
  TempDir dir;
  const float v = 1.0f;
  EXPECT_TRUE(FailsWith(write_safetensors(dir / "x.safetensors", {{"t", DType::F32, {1}, &v}, {"t", DType::F32, {1}, &v}}),
                        {"'t'", "twice"}));
  EXPECT_TRUE(FailsWith(write_safetensors(dir / "x.safetensors", {{"__metadata__", DType::F32, {1}, &v}}),
                        {"__metadata__"}));
  EXPECT_TRUE(FailsWith(write_safetensors(dir / "x.safetensors", {{"t", DType::F32, {4}, nullptr}}), {"'t'", "no data"}));
  EXPECT_TRUE(FailsWith(write_safetensors(dir / "no/such/dir/x.safetensors", {{"t", DType::F32, {1}, &v}}),
                        {"no/such/dir"}));
  EXPECT_FALSE(fs::exists(dir / "x.safetensors"));
}

// Opens a file with the given raw contents and returns the error.
Status open_raw(const TempDir& dir, const std::string& contents, fs::path* path_out = nullptr) {
  const fs::path path = dir / "bad.safetensors";
  write_file(path, contents);
  if (path_out) *path_out = path;
  auto file = SafetensorsFile::open(path);
  return file.ok() ? Status::Ok() : file.status();
}

TEST(Safetensors, MissingAndTruncatedFiles) {
  TempDir dir;
  const std::string p = (dir / "bad.safetensors").string();
  auto missing = SafetensorsFile::open(dir / "nope.safetensors");
  EXPECT_TRUE(FailsWith(missing, {(dir / "nope.safetensors").string(), "does not exist"}));

  EXPECT_TRUE(FailsWith(open_raw(dir, ""), {p, "truncated", "0 bytes"}));
  EXPECT_TRUE(FailsWith(open_raw(dir, "abc"), {p, "truncated", "3 bytes"}));

  // Header length larger than the file: absurd value and off-by-some value.
  std::string huge(8, '\xff');
  EXPECT_TRUE(FailsWith(open_raw(dir, huge + "{}"), {p, "header length", "18446744073709551615"}));
  std::string full = raw_safetensors("{\"__metadata__\":{}}", "");
  EXPECT_TRUE(FailsWith(open_raw(dir, full.substr(0, full.size() - 3)), {p, "truncated", "header length"}));

  // A tensor whose data ends beyond the file.
  const std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  EXPECT_TRUE(FailsWith(open_raw(dir, raw_safetensors(header, std::string(8, '\0'))),
                        {"tensor 'w'", p, "truncated", "[0, 16]", "8 data bytes"}));
}

TEST(Safetensors, BadHeaders) {
  TempDir dir;
  const std::string p = (dir / "bad.safetensors").string();
  EXPECT_TRUE(FailsWith(open_raw(dir, raw_safetensors("{\"w\": [1, 2", "")), {p, "not valid JSON"}));
  EXPECT_TRUE(FailsWith(open_raw(dir, raw_safetensors("[1, 2]", "")), {p, "not a JSON object"}));
  EXPECT_TRUE(FailsWith(open_raw(dir, raw_safetensors(R"({"__metadata__":{"x":1e400}})", "")),
                        {p, "not valid JSON", "range of a double"}));
  EXPECT_TRUE(FailsWith(open_raw(dir, raw_safetensors(R"({"w": 3})", "")), {"tensor 'w'", p, "not an object"}));
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    json entry = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}};
    entry.erase(key);
    const std::string h = json({{"w", entry}}).dump();
    EXPECT_TRUE(FailsWith(open_raw(dir, raw_safetensors(h, std::string(4, '\0'))), {"tensor 'w'", p, key})) << key;
  }
  EXPECT_TRUE(FailsWith(
      open_raw(dir, raw_safetensors(R"({"x":{"dtype":"Q8","shape":[4],"data_offsets":[0,4]}})", std::string(4, '\0'))),
      {"unknown dtype 'Q8' for tensor 'x' in " + p, "I64"}));
  EXPECT_TRUE(FailsWith(
      open_raw(dir, raw_safetensors(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, '\0'))),
      {"tensor 'x'", p, "shape"}));
  EXPECT_TRUE(FailsWith(
      open_raw(dir, raw_safetensors(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", std::string(4, '\0'))),
      {"tensor 'x'", p, "data_offsets"}));
  EXPECT_TRUE(FailsWith(
      open_raw(dir, raw_safetensors(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", std::string(4, '\0'))),
      {"tensor 'x'", p, "data_offsets"}));
  // Byte size that does not match the shape.
  EXPECT_TRUE(FailsWith(
      open_raw(dir, raw_safetensors(R"({"x":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,8]}})", std::string(8, '\0'))),
      {"tensor 'x'", p, "[2, 3]", "BF16", "needs 12 bytes", "hold 8"}));
  // Overlapping tensors.
  EXPECT_TRUE(FailsWith(open_raw(dir, raw_safetensors(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                                      R"("y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                                      std::string(16, '\0'))),
                        {"'x'", "'y'", p, "overlap"}));
  // Misaligned element data: the header is padded so that the F32 data starts at 2 mod 4.
  std::string h = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  while ((8 + h.size()) % 4 != 2) h.push_back(' ');
  EXPECT_TRUE(FailsWith(open_raw(dir, raw_safetensors(h, std::string(4, '\0'), /*pad=*/false)),
                        {"tensor 'x'", p, "element size"}));
  // Metadata is skipped, whatever it holds; spaces after the JSON are allowed.
  EXPECT_TRUE(open_raw(dir, raw_safetensors(R"({"__metadata__":{"format":"pt","x":"y"},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} )",
                                            std::string(4, '\0')))
                  .ok());
}

// Every dtype of the safetensors format opens, sized by its own element size; only F32, F16 and
// BF16 are marked computable.
TEST(Safetensors, EveryFormatDtypeOpensWithItsElementSize) {
  TempDir dir;
  const std::pair<const char*, int> dtypes[] = {{"BOOL", 1}, {"U8", 1},      {"I8", 1},      {"U16", 2},
                                                {"I16", 2},  {"U32", 4},     {"I32", 4},     {"U64", 8},
                                                {"I64", 8},  {"F64", 8},     {"C64", 8},     {"F8_E4M3", 1},
                                                {"F8_E5M2", 1}, {"F8_E8M0", 1}, {"F16", 2}, {"BF16", 2}, {"F32", 4}};
  for (const auto& [name, size] : dtypes) {
    const std::string h = json({{"x", {{"dtype", name}, {"shape", {3}}, {"data_offsets", {0, 3 * size}}}}}).dump();
    const fs::path path = dir / (std::string(name) + ".safetensors");
    write_file(path, raw_safetensors(h, std::string(static_cast<std::size_t>(3 * size), '\0')));
    auto file = SafetensorsFile::open(path);
    ASSERT_TRUE(file.ok()) << name << ": " << file.status().message();
    const TensorInfo* x = (*file)->find("x");
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->dtype_name, name);
    EXPECT_EQ(x->nbytes, static_cast<std::size_t>(3 * size));
    EXPECT_EQ(x->element_size, static_cast<std::size_t>(size));
    const std::string n = name;
    EXPECT_EQ(x->computable, n == "F32" || n == "F16" || n == "BF16") << name;
    // One element short is a size mismatch in that dtype's bytes.
    const std::string wrong = json({{"x", {{"dtype", name}, {"shape", {4}}, {"data_offsets", {0, 3 * size}}}}}).dump();
    EXPECT_TRUE(FailsWith(open_raw(dir, raw_safetensors(wrong, std::string(static_cast<std::size_t>(3 * size), '\0'))),
                          {"tensor 'x'", name, "needs " + std::to_string(4 * size) + " bytes"}));
  }
}

// Writes one shard with the given f32 vectors.
void write_shard(const fs::path& path, const std::vector<std::pair<std::string, std::vector<float>>>& tensors) {
  std::vector<TensorToWrite> w;
  for (const auto& [name, values] : tensors)
    w.push_back({name, DType::F32, {static_cast<std::int64_t>(values.size())}, values.data()});
  ASSERT_TRUE(write_safetensors(path, w).ok());
}

TEST(Checkpoint, SingleFile) {
  TempDir dir;
  write_shard(dir / "model.safetensors", {{"a", {1, 2}}, {"b", {3}}});
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_EQ((*ckpt)->tensor_count(), 2u);
  ASSERT_NE((*ckpt)->find("b"), nullptr);
  EXPECT_EQ(*static_cast<const float*>((*ckpt)->find("b")->data), 3.0f);
  auto missing = (*ckpt)->get("model.norm.weight");
  EXPECT_TRUE(FailsWith(missing, {"tensor 'model.norm.weight' not found in " + dir.path().string()}));
}

TEST(Checkpoint, ShardedViaIndex) {
  TempDir dir;
  write_shard(dir / "model-00001-of-00002.safetensors", {{"a", {1, 2}}, {"b", {3}}});
  write_shard(dir / "model-00002-of-00002.safetensors", {{"c", {4, 5, 6}}, {"extra", {9}}});
  const json index = {{"metadata", {{"total_size", 24}}},
                      {"weight_map",
                       {{"a", "model-00001-of-00002.safetensors"},
                        {"b", "model-00001-of-00002.safetensors"},
                        {"c", "model-00002-of-00002.safetensors"}}}};
  write_file(dir / "model.safetensors.index.json", index.dump());
  auto ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().message();
  EXPECT_EQ((*ckpt)->tensor_count(), 4u);  // the shards' extra tensor is visible too
  auto c = (*ckpt)->get("c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(static_cast<const float*>((*c)->data)[2], 6.0f);
  EXPECT_EQ((*c)->file, dir / "model-00002-of-00002.safetensors");
  EXPECT_EQ((*ckpt)->find("a")->file, dir / "model-00001-of-00002.safetensors");

  // model.safetensors wins when both exist.
  write_shard(dir / "model.safetensors", {{"z", {0}}});
  ckpt = Checkpoint::open(dir.path());
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ((*ckpt)->tensor_count(), 1u);
}

TEST(Checkpoint, Errors) {
  TempDir dir;
  EXPECT_TRUE(FailsWith(Checkpoint::open(dir / "absent"), {(dir / "absent").string(), "does not exist"}));
  EXPECT_TRUE(FailsWith(Checkpoint::open(dir.path()),
                        {"no model.safetensors or model.safetensors.index.json in " + dir.path().string()}));

  const std::string index_path = (dir / "model.safetensors.index.json").string();
  write_file(dir / "model.safetensors.index.json", "{not json");
  EXPECT_TRUE(FailsWith(Checkpoint::open(dir.path()), {index_path, "not valid JSON"}));
  write_file(dir / "model.safetensors.index.json", R"({"metadata": {"total_size": 1e400}})");
  EXPECT_TRUE(FailsWith(Checkpoint::open(dir.path()), {index_path, "not valid JSON", "range of a double"}));
  write_file(dir / "model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_TRUE(FailsWith(Checkpoint::open(dir.path()), {index_path, "weight_map"}));

  write_shard(dir / "s1.safetensors", {{"a", {1}}});
  write_file(dir / "model.safetensors.index.json",
             json({{"weight_map", {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}}}}).dump());
  EXPECT_TRUE(FailsWith(Checkpoint::open(dir.path()), {index_path, "'s2.safetensors'", "'b'", "does not exist"}));

  write_file(dir / "model.safetensors.index.json",
             json({{"weight_map", {{"a", "s1.safetensors"}, {"q", "s1.safetensors"}}}}).dump());
  EXPECT_TRUE(FailsWith(Checkpoint::open(dir.path()),
                        {"tensor 'q'", index_path, (dir / "s1.safetensors").string(), "does not contain it"}));

  // A broken shard is reported with its own file name.
  write_file(dir / "s2.safetensors", "xy");
  write_file(dir / "model.safetensors.index.json",
             json({{"weight_map", {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}}}}).dump());
  EXPECT_TRUE(FailsWith(Checkpoint::open(dir.path()), {(dir / "s2.safetensors").string(), "truncated"}));
}

}  // namespace
}  // namespace sy
