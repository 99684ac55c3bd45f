#include "engine/kv/paged_kv_cache.h"

#include <cassert>

namespace sy {

PagedKvCache::PagedKvCache(const ModelConfig& config, std::int32_t num_pages, std::int32_t page_size)
    : num_layers_(config.num_layers),
      num_pages_(num_pages),
      page_size_(page_size),
      n_kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim),
      layer_elements_(static_cast<std::int64_t>(num_pages) * page_size * config.num_kv_heads *
                      config.head_dim) {
  assert(num_pages > 0 && page_size > 0);
  k_.assign(static_cast<std::size_t>(layer_elements_ * num_layers_), 0.0f);
  v_.assign(k_.size(), 0.0f);
}

kernels::KvLayerView PagedKvCache::layer(std::int32_t layer) {
  assert(layer >= 0 && layer < num_layers_);
  kernels::KvLayerView view;
  view.k = k_.data() + layer * layer_elements_;
  view.v = v_.data() + layer * layer_elements_;
  view.num_pages = num_pages_;
  view.page_size = page_size_;
  view.n_kv_heads = n_kv_heads_;
  view.head_dim = head_dim_;
  return view;
}

std::int64_t PagedKvCache::bytes() const {
  return static_cast<std::int64_t>((k_.size() + v_.size()) * sizeof(float));
}

}  // namespace sy
