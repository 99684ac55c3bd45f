#include "console/model/skew_analysis.h"

#include <algorithm>
#include <map>
#include <set>

namespace sy::console {

SkewAnalysis analyze_skew(const LoadWindow& window, const RunMeta* meta, std::size_t top_n) {
  SkewAnalysis a;
  a.window_start_ns = window.start_ns;
  a.window_end_ns = window.end_ns;
  std::int32_t max_block = -1, max_expert = -1, max_device = -1;
  for (const auto& r : window.records) {
    max_block = std::max(max_block, r.block);
    max_expert = std::max(max_expert, r.expert);
    max_device = std::max(max_device, r.device);
  }
  a.blocks = meta != nullptr && meta->blocks > 0 ? meta->blocks : max_block + 1;
  a.experts = meta != nullptr && meta->experts > 0 ? meta->experts : max_expert + 1;
  a.devices = std::max(max_device + 1, meta != nullptr ? static_cast<std::int32_t>(meta->devices.size()) : 0);
  if (a.blocks <= 0 || a.experts <= 0) return a;

  a.tokens.assign(static_cast<std::size_t>(a.blocks * a.experts), 0);
  a.device_tokens.assign(static_cast<std::size_t>(std::max(a.devices, 0)), 0);
  std::map<std::pair<std::int32_t, std::int32_t>, std::set<std::int32_t>> replicas;
  for (const auto& r : window.records) {
    if (r.block < 0 || r.block >= a.blocks || r.expert < 0 || r.expert >= a.experts || r.device < 0 ||
        r.device >= a.devices || r.tokens < 0)
      continue;
    a.tokens[static_cast<std::size_t>(r.block * a.experts + r.expert)] += r.tokens;
    a.device_tokens[static_cast<std::size_t>(r.device)] += r.tokens;
    a.total_tokens += r.tokens;
    if (r.tokens > 0) replicas[{r.block, r.expert}].insert(r.device);
  }

  a.block_imbalance.assign(static_cast<std::size_t>(a.blocks), 0.0);
  for (std::int32_t b = 0; b < a.blocks; ++b) {
    std::int64_t sum = 0, max = 0;
    for (std::int32_t e = 0; e < a.experts; ++e) {
      sum += a.at(b, e);
      max = std::max(max, a.at(b, e));
    }
    if (sum > 0)
      a.block_imbalance[static_cast<std::size_t>(b)] =
          static_cast<double>(max) / (static_cast<double>(sum) / static_cast<double>(a.experts));
  }

  // Devices that host experts: from the placement when known, else those that received tokens.
  std::set<std::int32_t> hosts;
  if (meta != nullptr)
    for (const auto& block : meta->placement)
      for (const auto& devs : block)
        for (std::int32_t d : devs)
          if (d >= 0 && d < a.devices) hosts.insert(d);
  if (hosts.empty())
    for (std::int32_t d = 0; d < a.devices; ++d)
      if (a.device_tokens[static_cast<std::size_t>(d)] > 0) hosts.insert(d);
  if (!hosts.empty()) {
    std::int64_t sum = 0, max = 0;
    for (std::int32_t d : hosts) {
      sum += a.device_tokens[static_cast<std::size_t>(d)];
      max = std::max(max, a.device_tokens[static_cast<std::size_t>(d)]);
    }
    if (sum > 0)
      a.device_imbalance = static_cast<double>(max) / (static_cast<double>(sum) / static_cast<double>(hosts.size()));
  }

  std::vector<HotExpert> all;
  for (std::int32_t b = 0; b < a.blocks; ++b) {
    std::int64_t sum = 0;
    for (std::int32_t e = 0; e < a.experts; ++e) sum += a.at(b, e);
    const double mean = static_cast<double>(sum) / static_cast<double>(a.experts);
    for (std::int32_t e = 0; e < a.experts; ++e) {
      if (a.at(b, e) == 0) continue;
      HotExpert h{b, e, a.at(b, e), mean > 0 ? static_cast<double>(a.at(b, e)) / mean : 0.0, {}};
      if (auto it = replicas.find({b, e}); it != replicas.end()) h.devices.assign(it->second.begin(), it->second.end());
      all.push_back(std::move(h));
    }
  }
  const std::size_t n = std::min(top_n, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(),
                    [](const HotExpert& x, const HotExpert& y) {
                      if (x.tokens != y.tokens) return x.tokens > y.tokens;
                      return x.vs_block_mean > y.vs_block_mean;
                    });
  all.resize(n);
  a.hottest = std::move(all);
  return a;
}

}  // namespace sy::console
