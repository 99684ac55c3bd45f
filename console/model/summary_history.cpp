#include "console/model/summary_history.h"

#include <algorithm>

namespace sy::console {
namespace {

double weighted(double a, double wa, double b, double wb) {
  return wa + wb > 0 ? (a * wa + b * wb) / (wa + wb) : (a + b) / 2;
}

void fold_latency(LatencySummary& a, const LatencySummary& b) {
  const auto wa = static_cast<double>(a.count), wb = static_cast<double>(b.count);
  if (b.count == 0) return;
  if (a.count == 0) {
    a = b;
    return;
  }
  a.mean = weighted(a.mean, wa, b.mean, wb);
  a.p50 = weighted(a.p50, wa, b.p50, wb);
  a.p90 = weighted(a.p90, wa, b.p90, wb);
  a.p99 = weighted(a.p99, wa, b.p99, wb);
  a.count += b.count;
}

}  // namespace

void fold_summary(SummaryPoint& a, const SummaryPoint& b) {
  const auto wa = static_cast<double>(a.t_end_ns - a.t_begin_ns), wb = static_cast<double>(b.t_end_ns - b.t_begin_ns);
  a.tokens_per_s = weighted(a.tokens_per_s, wa, b.tokens_per_s, wb);
  a.requests_per_s = weighted(a.requests_per_s, wa, b.requests_per_s, wb);
  a.requests_finished += b.requests_finished;
  a.running = static_cast<std::int64_t>(weighted(static_cast<double>(a.running), wa, static_cast<double>(b.running), wb) + 0.5);
  a.waiting = static_cast<std::int64_t>(weighted(static_cast<double>(a.waiting), wa, static_cast<double>(b.waiting), wb) + 0.5);
  fold_latency(a.itl_ms, b.itl_ms);
  fold_latency(a.ttft_ms, b.ttft_ms);
  a.kv_usage = weighted(a.kv_usage, wa, b.kv_usage, wb);
  a.prefix_queries += b.prefix_queries;
  a.prefix_hits += b.prefix_hits;
  for (const DeviceWindow& d : b.devices) {
    auto it = std::find_if(a.devices.begin(), a.devices.end(), [&](const DeviceWindow& x) { return x.device == d.device; });
    if (it == a.devices.end()) {
      a.devices.push_back(d);
      continue;
    }
    it->busy = weighted(it->busy, wa, d.busy, wb);
    it->stall_queue_empty = weighted(it->stall_queue_empty, wa, d.stall_queue_empty, wb);
    it->stall_barrier = weighted(it->stall_barrier, wa, d.stall_barrier, wb);
    it->stall_transfer = weighted(it->stall_transfer, wa, d.stall_transfer, wb);
    it->stall_weights = weighted(it->stall_weights, wa, d.stall_weights, wb);
    const auto ea = static_cast<double>(it->executions), eb = static_cast<double>(d.executions);
    it->rows_per_execution = weighted(it->rows_per_execution, ea, d.rows_per_execution, eb);
    it->executions += d.executions;
    if (d.has_traffic) {
      // Means of rows by the shipments behind them, waits by the takes; the longest wait stays.
      const auto xa = static_cast<double>(it->transfers), xb = static_cast<double>(d.transfers);
      it->rows_per_transfer = weighted(it->rows_per_transfer, xa, d.rows_per_transfer, xb);
      it->transfers += d.transfers;
      const auto qa = static_cast<double>(it->queue_takes), qb = static_cast<double>(d.queue_takes);
      it->queue_wait_mean_ms = weighted(it->queue_wait_mean_ms, qa, d.queue_wait_mean_ms, qb);
      it->queue_takes += d.queue_takes;
      it->queue_wait_max_ms = std::max(it->queue_wait_max_ms, d.queue_wait_max_ms);
      it->has_traffic = true;
    }
  }
  if (a.expert_imbalance.size() < b.expert_imbalance.size()) a.expert_imbalance.resize(b.expert_imbalance.size(), 0.0);
  for (std::size_t i = 0; i < b.expert_imbalance.size(); ++i)
    a.expert_imbalance[i] = weighted(a.expert_imbalance[i], wa, b.expert_imbalance[i], wb);
  a.dropped_events += b.dropped_events;
  a.t_begin_ns = std::min(a.t_begin_ns, b.t_begin_ns);
  a.t_end_ns = std::max(a.t_end_ns, b.t_end_ns);
}

void SummaryFold::merge(const SummaryFold& later) {
  if (!later.any) return;
  if (!any) {
    *this = later;
    return;
  }
  fold_summary(point, later.point);
}

void SummaryHistory::add(const SummaryPoint& p) {
  SummaryFold* w = windows_.at(p.t_begin_ns);
  if (w == nullptr) return;
  if (!w->any) {
    w->point = p;
    w->any = true;
  } else {
    fold_summary(w->point, p);
  }
}

std::vector<const SummaryPoint*> SummaryHistory::points(std::int64_t until_ns) const {
  std::vector<const SummaryPoint*> out;
  for (std::size_t i = 0; i < windows_.size(); ++i) {
    const SummaryFold& f = windows_[i];
    if (!f.any) continue;
    if (f.point.t_end_ns > until_ns) break;
    out.push_back(&f.point);
  }
  return out;
}

std::size_t SummaryHistory::held_bytes() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < windows_.size(); ++i) {
    const SummaryPoint& p = windows_[i].point;
    n += sizeof(SummaryFold) + p.devices.capacity() * sizeof(DeviceWindow) + p.expert_imbalance.capacity() * sizeof(double);
  }
  return n;
}

}  // namespace sy::console
