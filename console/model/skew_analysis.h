// What the skew view shows for one expert-load window: tokens per (block, expert) over all
// replicas, imbalance (max/mean) per block and across devices, and the hottest experts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "console/model/expert_load_store.h"
#include "console/model/run_meta.h"

namespace sy::console {

struct HotExpert {
  std::int32_t block = 0;
  std::int32_t expert = 0;
  std::int64_t tokens = 0;
  double vs_block_mean = 0;  // tokens / mean tokens per expert of its block
  std::vector<std::int32_t> devices;  // replicas that received tokens
};

struct SkewAnalysis {
  std::int64_t window_start_ns = 0;
  std::int64_t window_end_ns = 0;
  std::int32_t blocks = 0;
  std::int32_t experts = 0;
  std::int32_t devices = 0;
  std::vector<std::int64_t> tokens;        // [block * experts + expert]
  std::vector<double> block_imbalance;     // max/mean over the block's experts; 0 for an idle block
  std::vector<std::int64_t> device_tokens;  // [device]
  double device_imbalance = 0;             // max/mean over devices that host experts
  std::int64_t total_tokens = 0;
  std::vector<HotExpert> hottest;          // by tokens, descending

  std::int64_t at(std::int32_t block, std::int32_t expert) const {
    return tokens[static_cast<std::size_t>(block * experts + expert)];
  }
};

// `meta` (may be null) gives the dimensions and which devices host experts; without it they come
// from the records. Records outside the dimensions are ignored.
SkewAnalysis analyze_skew(const LoadWindow& window, const RunMeta* meta, std::size_t top_n = 10);

}  // namespace sy::console
