#include "console/model/queue_history.h"

#include <algorithm>

namespace sy::console {

void QueueHistory::Row::step(std::int64_t t, std::int64_t delta) {
  if (!started) {
    started = true;
    last_t = t;
  }
  // Queues of a row report apart; one a little behind the others is counted at the row's time.
  t = std::max(t, last_t);
  const double depth = static_cast<double>(total);
  const std::int64_t held = total;
  windows.spread(last_t, t, [&](QueueWindow& w, std::int64_t overlap) {
    w.token_ns += depth * static_cast<double>(overlap);
    w.raise(held);
  });
  last_t = t;
  total += delta;
  if (QueueWindow* w = windows.at(t)) {
    w->raise(total);
  }
}

void QueueHistory::add(const telemetry::QueueSample& q) {
  const QueueKey key{q.device, q.layer, q.block, q.index};
  auto [it, fresh] = depth_.try_emplace(key, 0);
  const std::int64_t delta = q.depth_tokens - it->second;
  it->second = q.depth_tokens;
  blocks_.try_emplace({q.device, static_cast<int>(q.layer), q.block}, kMaxBlockWindows).first->second.step(q.t_ns, delta);
  devices_.try_emplace(q.device, kMaxDeviceWindows).first->second.step(q.t_ns, delta);
  (void)fresh;
}

void QueueHistory::add_device_window(std::int32_t device, std::int64_t start_ns, std::int64_t window_ns,
                                     std::int64_t queue_token_ns) {
  if (window_ns <= 0) return;
  const double per_ns = static_cast<double>(queue_token_ns) / static_cast<double>(window_ns);
  devices_.try_emplace(device, kMaxDeviceWindows).first->second.windows.spread(start_ns, start_ns + window_ns, [&](QueueWindow& w, std::int64_t overlap) {
    w.token_ns += per_ns * static_cast<double>(overlap);
  });
}

void QueueHistory::clear() {
  depth_.clear();
  blocks_.clear();
  devices_.clear();
}

const FoldingWindows<QueueWindow>* QueueHistory::row(QueueGrouping grouping, const QueueKey& first) const {
  if (grouping == QueueGrouping::DeviceBlock) {
    auto it = blocks_.find({first.device, static_cast<int>(first.layer), first.block});
    return it == blocks_.end() ? nullptr : &it->second.windows;
  }
  if (grouping == QueueGrouping::Device) {
    auto it = devices_.find(first.device);
    return it == devices_.end() ? nullptr : &it->second.windows;
  }
  return nullptr;
}

std::vector<QueueKey> QueueHistory::row_keys(QueueGrouping grouping) const {
  std::vector<QueueKey> out;
  if (grouping == QueueGrouping::DeviceBlock)
    for (const auto& [k, r] : blocks_)
      out.push_back({std::get<0>(k), static_cast<telemetry::LayerKind>(std::get<1>(k)), std::get<2>(k), 0});
  else if (grouping == QueueGrouping::Device)
    for (const auto& [d, r] : devices_) out.push_back({d, telemetry::LayerKind::Attention, 0, 0});
  return out;
}

void QueueHistory::accumulate_bins(QueueGrouping grouping, const QueueKey& first, std::int64_t t0, std::int64_t t1,
                                   BinMode mode, std::int64_t held0, std::int64_t held1, std::vector<double>& out) const {
  const FoldingWindows<QueueWindow>* s = row(grouping, first);
  if (s == nullptr || s->empty() || out.empty() || t1 <= t0) return;
  const std::size_t bins = out.size();
  const double bin_ns = static_cast<double>(t1 - t0) / static_cast<double>(bins);
  const double window_ns = static_cast<double>(s->window_ns());
  auto segment = [&](std::size_t bin, std::int64_t a, std::int64_t b) {
    for (std::size_t i = s->index_at(a); i < s->size(); ++i) {
      const std::int64_t lo = s->start_of(i), hi = lo + s->window_ns();
      if (lo >= b) break;
      const std::int64_t overlap = std::min(hi, b) - std::max(lo, a);
      if (overlap <= 0) continue;
      const QueueWindow& w = (*s)[i];
      if (mode == BinMode::Mean)
        out[bin] += w.token_ns / window_ns * static_cast<double>(overlap) / bin_ns;
      else if (w.peak >= 0)
        out[bin] = std::max(out[bin], static_cast<double>(w.peak));
    }
  };
  for (std::size_t bin = 0; bin < bins; ++bin) {
    const auto lo = t0 + static_cast<std::int64_t>(bin_ns * static_cast<double>(bin));
    const auto hi = bin + 1 == bins ? t1 : t0 + static_cast<std::int64_t>(bin_ns * static_cast<double>(bin + 1));
    if (hi <= s->begin_ns() || lo >= s->end_ns()) continue;
    if (lo < held0) segment(bin, lo, std::min(hi, held0));
    if (hi > held1) segment(bin, std::max(lo, held1), hi);
  }
}

std::int64_t QueueHistory::begin_ns() const {
  std::int64_t b = 0;
  bool any = false;
  for (const auto& [d, r] : devices_)
    if (!r.windows.empty()) {
      b = any ? std::min(b, r.windows.begin_ns()) : r.windows.begin_ns();
      any = true;
    }
  return b;
}

std::int64_t QueueHistory::end_ns() const {
  std::int64_t e = 0;
  for (const auto& [d, r] : devices_) e = std::max(e, r.windows.end_ns());
  return e;
}

std::size_t QueueHistory::held_bytes() const {
  std::size_t n = depth_.size() * (sizeof(QueueKey) + sizeof(std::int64_t) + 32);
  for (const auto& [k, r] : blocks_) n += r.windows.size() * sizeof(QueueWindow) + sizeof(Row);
  for (const auto& [d, r] : devices_) n += r.windows.size() * sizeof(QueueWindow) + sizeof(Row);
  return n;
}

}  // namespace sy::console
