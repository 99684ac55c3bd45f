// Writes a randomly initialised model in Hugging Face layout and tensor names (make-model).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/model_config.h"

namespace sy {

enum class ModelPreset { Tiny, Small };
StatusOr<ModelPreset> parse_preset(const std::string& name);

// The config of a preset: tiny is a few MB (tests, demo); small is 0.3–0.7 B parameters
// (benchmarks). Architecture-specific fields (shared expert, qk-norm, dense layers) are set so
// every code path of the architecture is exercised.
ModelConfig preset_config(Arch arch, ModelPreset preset, kernels::DType dtype);

// A file written beside the weights (tokenizer.json, tokenizer_config.json).
struct ModelFile {
  std::string name;
  std::string content;
};

// Writes DIR/config.json and DIR/model.safetensors (sharded with an index when larger than
// shard_bytes) with weights drawn from a seeded normal distribution, norms around 1, and
// `extra_files` beside them. `progress` (may be empty) hears the weight bytes written so far
// and in all after each tensor.
using ByteProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;
Status write_random_model(const ModelConfig& config, std::uint64_t seed,
                          const std::filesystem::path& dir,
                          std::uint64_t shard_bytes = 2ull << 30,
                          const std::vector<ModelFile>& extra_files = {}, const ByteProgress& progress = {});

}  // namespace sy
