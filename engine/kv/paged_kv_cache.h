// The storage of one attention rank's paged KV cache on the host: a pool of fixed-size pages
// for every layer. Which page belongs to whom is the KvBlockAllocator's business; kernels find
// a sequence's positions through its block table.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/model_config.h"
#include "kernels/cpu/paged_attention.h"

namespace sy {

class PagedKvCache {
 public:
  // num_pages pages of page_size positions, shared by all layers (a page id indexes every
  // layer's pool, so one block table serves the whole model).
  PagedKvCache(const ModelConfig& config, std::int32_t num_pages, std::int32_t page_size);

  kernels::KvLayerView layer(std::int32_t layer);
  std::int32_t page_size() const { return page_size_; }
  std::int32_t num_pages() const { return num_pages_; }
  std::int64_t bytes() const;

 private:
  std::int32_t num_layers_, num_pages_, page_size_, n_kv_heads_, head_dim_;
  std::int64_t layer_elements_;  // floats of K (or V) per layer
  std::vector<float> k_, v_;
};

}  // namespace sy
