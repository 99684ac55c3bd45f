#include "console/model/summary_store.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace sy::console {
namespace {

using nlohmann::json;

double number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0.0;
  if (!it->is_number()) throw std::runtime_error(std::string("key \"") + key + "\" is not a number");
  return it->get<double>();
}

std::int64_t integer(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0;
  if (!it->is_number()) throw std::runtime_error(std::string("key \"") + key + "\" is not a number");
  return it->is_number_integer() ? it->get<std::int64_t>() : static_cast<std::int64_t>(it->get<double>());
}

LatencySummary latency(const json& j, const char* key) {
  LatencySummary l;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return l;
  if (!it->is_object()) throw std::runtime_error(std::string("key \"") + key + "\" is not an object");
  l.count = integer(*it, "count");
  l.mean = number(*it, "mean");
  l.p50 = number(*it, "p50");
  l.p90 = number(*it, "p90");
  l.p99 = number(*it, "p99");
  return l;
}

}  // namespace

StatusOr<SummaryPoint> parse_summary(const std::string& json_object) {
  json j;
  try {
    j = json::parse(json_object);
  } catch (const json::exception& e) {
    return Status::Error(std::string("summary is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return Status::Error("summary is not a JSON object");
  SummaryPoint p;
  try {
    p.t_begin_ns = integer(j, "t_begin_ns");
    p.t_end_ns = integer(j, "t_end_ns");
    p.tokens_per_s = number(j, "tokens_per_s");
    p.requests_per_s = number(j, "requests_per_s");
    p.requests_finished = integer(j, "requests_finished");
    p.running = integer(j, "running");
    p.waiting = integer(j, "waiting");
    p.itl_ms = latency(j, "itl_ms");
    p.ttft_ms = latency(j, "ttft_ms");
    p.kv_usage = number(j, "kv_usage");
    p.dropped_events = integer(j, "dropped_events");
    if (auto pc = j.find("prefix_cache"); pc != j.end() && !pc->is_null()) {
      if (!pc->is_object()) throw std::runtime_error("key \"prefix_cache\" is not an object");
      p.prefix_queries = integer(*pc, "queries");
      p.prefix_hits = integer(*pc, "hits");
    }
    if (auto it = j.find("devices"); it != j.end() && it->is_array()) {
      std::int32_t position = 0;
      for (const json& d : *it) {
        if (!d.is_object()) throw std::runtime_error("an entry of \"devices\" is not an object");
        DeviceWindow w;
        w.device = d.contains("device") ? static_cast<std::int32_t>(integer(d, "device")) : position;
        w.busy = number(d, "busy");
        if (auto s = d.find("stall"); s != d.end() && s->is_object()) {
          w.stall_queue_empty = number(*s, "queue_empty");
          w.stall_barrier = number(*s, "barrier");
          w.stall_transfer = number(*s, "transfer");
          w.stall_weights = number(*s, "weights");
        }
        w.executions = integer(d, "executions");
        w.rows_per_execution = number(d, "rows_per_execution");
        if (d.contains("transfers")) {
          w.has_traffic = true;
          w.transfers = integer(d, "transfers");
          w.rows_per_transfer = number(d, "rows_per_transfer");
          w.queue_takes = integer(d, "queue_takes");
          if (auto q = d.find("queue_wait_ms"); q != d.end() && q->is_object()) {
            w.queue_wait_mean_ms = number(*q, "mean");
            w.queue_wait_max_ms = number(*q, "max");
          }
        }
        p.devices.push_back(w);
        ++position;
      }
    }
    if (auto it = j.find("expert_imbalance"); it != j.end() && it->is_array())
      for (const json& v : *it) p.expert_imbalance.push_back(v.is_number() ? v.get<double>() : 0.0);
  } catch (const std::exception& e) {
    return Status::Error(std::string("summary: ") + e.what());
  }
  if (p.t_end_ns < p.t_begin_ns) return Status::Error("summary: t_end_ns is before t_begin_ns");
  return p;
}

bool SummaryStore::add(const SummaryPoint& p) {
  if (!points_.empty() && p.t_end_ns <= points_.back().t_end_ns) return false;
  points_.push_back(p);
  return true;
}

void SummaryStore::trim(std::int64_t cutoff_ns) {
  std::size_t n = 0;
  while (n + 1 < points_.size() && points_[n].t_end_ns < cutoff_ns) ++n;
  points_.pop_front(n);
}

const SummaryPoint* SummaryStore::at(std::int64_t t_ns) const {
  auto it = std::upper_bound(points_.begin(), points_.end(), t_ns,
                             [](std::int64_t t, const SummaryPoint& p) { return t < p.t_end_ns; });
  // `it` is the first window ending after t: it contains t when it began at or before t.
  if (it != points_.end() && it->t_begin_ns <= t_ns) return &*it;
  if (it == points_.begin()) return nullptr;
  return &*(it - 1);
}

std::string describe_summary(const SummaryPoint& p) {
  auto ms = [](const LatencySummary& l, double v, const char* format) {
    if (l.count == 0) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof buf, format, v);
    return std::string(buf);
  };
  char buf[256];
  std::snprintf(buf, sizeof buf, "%.0f tok/s  %.1f req/s  ITL p50 %s p99 %s ms  TTFT p50 %s ms  running %lld  waiting %lld  KV %.0f%%",
                p.tokens_per_s, p.requests_per_s, ms(p.itl_ms, p.itl_ms.p50, "%.2f").c_str(),
                ms(p.itl_ms, p.itl_ms.p99, "%.2f").c_str(), ms(p.ttft_ms, p.ttft_ms.p50, "%.1f").c_str(),
                static_cast<long long>(p.running), static_cast<long long>(p.waiting), p.kv_usage * 100);
  std::string line = buf;
  // Only where a prefix cache admitted something in the window.
  if (p.prefix_queries > 0) {
    std::snprintf(buf, sizeof buf, "  prefix cache %.0f%%", p.prefix_hit_rate() * 100);
    line += buf;
  }
  if (p.dropped_events > 0) line += "  (events dropped!)";
  return line;
}

}  // namespace sy::console
