// A model directory's weights: one model.safetensors or shards listed by an index file.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/safetensors.h"

namespace sy {

class Checkpoint {
 public:
  // Opens DIR/model.safetensors, or every shard named in DIR/model.safetensors.index.json
  // (an index naming a missing shard, or a tensor the shard lacks, is an error naming both).
  static StatusOr<std::unique_ptr<Checkpoint>> open(const std::filesystem::path& dir);

  // The tensor, or an error "tensor 'NAME' not found in DIR (…)".
  StatusOr<const TensorInfo*> get(const std::string& name) const;
  const TensorInfo* find(const std::string& name) const;
  std::size_t tensor_count() const;
  // Every tensor by name.
  const std::map<std::string, const TensorInfo*>& tensors() const { return index_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
  std::string layout_;  // "model.safetensors" or "N shards listed by model.safetensors.index.json"
};

}  // namespace sy
