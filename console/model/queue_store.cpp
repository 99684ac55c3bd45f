#include "console/model/queue_store.h"

#include <algorithm>

namespace sy::console {
namespace {

// Index of the last point at or before t, or -1.
std::ptrdiff_t last_at_or_before(const RingBuffer<DepthPoint>& s, std::int64_t t) {
  auto it = std::upper_bound(s.begin(), s.end(), t, [](std::int64_t v, const DepthPoint& p) { return v < p.t_ns; });
  return (it - s.begin()) - 1;
}

}  // namespace

bool QueueStore::add(const telemetry::QueueSample& sample) {
  const QueueKey key{sample.device, sample.layer, sample.block, sample.index};
  auto it = series_.find(key);
  if (it == series_.end()) it = series_.emplace(key, RingBuffer<DepthPoint>(capacity_)).first;
  RingBuffer<DepthPoint>& s = it->second;
  if (!s.empty() && sample.t_ns < s.back().t_ns) {
    ++out_of_order_;
    return false;
  }
  const bool drops = s.full();
  s.push_back({sample.t_ns, sample.depth_tokens, sample.oldest_age_ns});
  if (drops) complete_from_ns_ = std::max(complete_from_ns_, s.front().t_ns);
  max_depth_ = std::max(max_depth_, sample.depth_tokens);
  return true;
}

void QueueStore::trim(std::int64_t cutoff_ns) {
  for (auto& [key, s] : series_) {
    // Keep the last sample before the cutoff: it gives the depth at the cutoff.
    const std::ptrdiff_t last = last_at_or_before(s, cutoff_ns);
    if (last > 0) {
      s.pop_front(static_cast<std::size_t>(last));
      complete_from_ns_ = std::max(complete_from_ns_, s.front().t_ns);
    }
  }
}

void QueueStore::clear() {
  series_.clear();
  max_depth_ = 0;
  complete_from_ns_ = std::numeric_limits<std::int64_t>::min();
}

std::vector<QueueKey> QueueStore::keys() const {
  std::vector<QueueKey> out;
  out.reserve(series_.size());
  for (const auto& [key, s] : series_) out.push_back(key);
  return out;
}

const RingBuffer<DepthPoint>* QueueStore::series(const QueueKey& key) const {
  auto it = series_.find(key);
  return it == series_.end() ? nullptr : &it->second;
}

std::vector<QueueRow> QueueStore::rows(QueueGrouping grouping) const {
  std::vector<QueueRow> out;
  for (const auto& [key, s] : series_) {  // map order: device, layer, block, index
    bool same = false;
    if (!out.empty()) {
      const QueueKey& f = out.back().first;
      switch (grouping) {
        case QueueGrouping::EachQueue: same = false; break;
        case QueueGrouping::DeviceBlock: same = f.device == key.device && f.layer == key.layer && f.block == key.block; break;
        case QueueGrouping::Device: same = f.device == key.device; break;
      }
    }
    if (!same) out.push_back({key, {}});
    out.back().members.push_back(key);
  }
  return out;
}

std::int64_t QueueStore::depth_at(const QueueKey& key, std::int64_t t_ns) const {
  const auto* s = series(key);
  if (s == nullptr) return 0;
  const std::ptrdiff_t i = last_at_or_before(*s, t_ns);
  return i < 0 ? 0 : (*s)[static_cast<std::size_t>(i)].depth_tokens;
}

void QueueStore::accumulate_bins(const QueueKey& key, std::int64_t t0_ns, std::int64_t t1_ns, BinMode mode,
                                 std::vector<double>& out, std::int64_t from_ns, std::int64_t to_ns) const {
  const auto* s = series(key);
  if (s == nullptr || s->empty() || out.empty() || t1_ns <= t0_ns) return;
  const std::size_t bins = out.size();
  const double bin_ns = static_cast<double>(t1_ns - t0_ns) / static_cast<double>(bins);
  std::vector<double> local(bins, 0.0);

  // Walk the step function's segments [a, b) with value v across the bins they cover.
  std::ptrdiff_t i = last_at_or_before(*s, t0_ns);
  std::int64_t a = t0_ns;
  double v = i < 0 ? 0.0 : static_cast<double>((*s)[static_cast<std::size_t>(i)].depth_tokens);
  std::size_t next = static_cast<std::size_t>(i + 1);
  while (a < t1_ns) {
    const std::int64_t b = next < s->size() ? std::min(t1_ns, (*s)[next].t_ns) : t1_ns;
    const std::int64_t ca = std::max(a, from_ns), cb = std::min(b, to_ns);
    if (cb > ca && v != 0.0) {
      const auto first_bin = static_cast<std::size_t>(static_cast<double>(ca - t0_ns) / bin_ns);
      for (std::size_t bin = std::min(first_bin, bins - 1); bin < bins; ++bin) {
        const double lo = static_cast<double>(t0_ns) + bin_ns * static_cast<double>(bin);
        const double hi = lo + bin_ns;
        const double overlap = std::min(hi, static_cast<double>(cb)) - std::max(lo, static_cast<double>(ca));
        if (overlap <= 0) {
          if (lo >= static_cast<double>(cb)) break;
          continue;
        }
        if (mode == BinMode::Mean)
          local[bin] += v * overlap / bin_ns;
        else
          local[bin] = std::max(local[bin], v);
      }
    }
    if (next >= s->size()) break;
    a = std::max(a, b);
    v = static_cast<double>((*s)[next].depth_tokens);
    ++next;
  }
  for (std::size_t bin = 0; bin < bins; ++bin) out[bin] += local[bin];
}

}  // namespace sy::console
