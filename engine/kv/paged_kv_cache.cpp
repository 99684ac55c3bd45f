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
  free_.reserve(static_cast<std::size_t>(num_pages));
  for (std::int32_t p = num_pages - 1; p >= 0; --p) free_.push_back(p);
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

std::int32_t PagedKvCache::allocate_page() {
  if (free_.empty()) return -1;
  std::int32_t page = free_.back();
  free_.pop_back();
  return page;
}

void PagedKvCache::free_page(std::int32_t page) {
  assert(page >= 0 && page < num_pages_);
  free_.push_back(page);
}

bool SequenceKv::reserve(PagedKvCache& cache, std::int64_t positions) {
  std::int32_t needed = cache.pages_for(positions) - pages();
  if (needed <= 0) return true;
  if (needed > cache.free_pages()) return false;
  for (std::int32_t i = 0; i < needed; ++i) pages_.push_back(cache.allocate_page());
  return true;
}

void SequenceKv::release(PagedKvCache& cache) {
  for (std::int32_t page : pages_) cache.free_page(page);
  pages_.clear();
  length = 0;
}

}  // namespace sy
