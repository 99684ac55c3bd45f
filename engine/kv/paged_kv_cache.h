// The paged KV cache of one attention rank: a pool of fixed-size pages for every layer, and
// the per-sequence block tables that map a sequence's positions onto pages.
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
  std::int32_t free_pages() const { return static_cast<std::int32_t>(free_.size()); }
  std::int64_t bytes() const;

  // Pages needed to hold `positions` positions.
  std::int32_t pages_for(std::int64_t positions) const {
    return static_cast<std::int32_t>((positions + page_size_ - 1) / page_size_);
  }
  // Takes a free page; -1 when none is left.
  std::int32_t allocate_page();
  void free_page(std::int32_t page);

 private:
  std::int32_t num_layers_, num_pages_, page_size_, n_kv_heads_, head_dim_;
  std::int64_t layer_elements_;  // floats of K (or V) per layer
  std::vector<float> k_, v_;
  std::vector<std::int32_t> free_;  // a stack: recently freed pages are reused first (warm)
};

// One sequence's view of the cache: its block table and how many positions are stored.
class SequenceKv {
 public:
  // Makes sure positions [0, positions) have pages; false (nothing taken) when the cache is
  // too full, so the caller can queue or reject the request instead of failing mid-step.
  bool reserve(PagedKvCache& cache, std::int64_t positions);
  // Returns every page to the cache.
  void release(PagedKvCache& cache);

  const std::int32_t* block_table() const { return pages_.data(); }
  std::int32_t pages() const { return static_cast<std::int32_t>(pages_.size()); }
  std::int32_t length = 0;  // positions already written

 private:
  std::vector<std::int32_t> pages_;
};

}  // namespace sy
