#include "engine/serving/metrics.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <limits>
#include <numeric>

#include "telemetry/host_share.h"

namespace sy {
namespace {

// Length of the union of `intervals` within [lo, hi].
std::int64_t covered(std::vector<std::pair<std::int64_t, std::int64_t>> intervals, std::int64_t lo, std::int64_t hi) {
  for (auto& [s, e] : intervals) {
    s = std::max(s, lo);
    e = std::min(e, hi);
  }
  // A device's busy and stall logs come in time order: sorting them again for every report
  // cost the live summary more than the rest of its work.
  if (!std::is_sorted(intervals.begin(), intervals.end())) std::sort(intervals.begin(), intervals.end());
  std::int64_t total = 0;
  std::int64_t reach = lo;  // everything before `reach` is already counted
  for (const auto& [s, e] : intervals) {
    const std::int64_t from = std::max(s, reach);
    if (e > from) {
      total += e - from;
      reach = e;
    }
  }
  return total;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string percent(double fraction) { return fixed(100.0 * fraction, 1) + "%"; }

// Rows of cells, two spaces apart; the first column left-aligned, the others right-aligned
// (numbers) unless `left` (text).
std::string render(const std::vector<std::vector<std::string>>& rows, bool left = false) {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c > 0) line += "  ";
      line += (c == 0 || left) ? row[c] + pad : pad + row[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

// Drops the records (intervals, executions) of `log` that ended before t. Ends ascending
// (`ordered`), those are a prefix, found by binary search rather than by testing every record
// kept: a live run forgets once a second, and that test over every log cost 2.5 % of a 30 s
// demo's CPU time.
template <class Record>
void forget_ended_before(std::vector<Record>& log, bool ordered, std::int64_t t) {
  if (ordered) {
    log.erase(log.begin(),
              std::lower_bound(log.begin(), log.end(), t, [](const Record& r, std::int64_t x) { return r.end < x; }));
  } else {
    std::erase_if(log, [t](const Record& r) { return r.end < t; });
  }
}

std::vector<std::string> latency_row(const std::string& name, const LatencyStats& s) {
  if (s.count == 0) return {name, "0", "-", "-", "-"};
  return {name, std::to_string(s.count), fixed(s.mean_ms, 3), fixed(s.p50_ms, 3), fixed(s.p99_ms, 3)};
}

}  // namespace

LatencyStats latency_stats(std::vector<double> ns) {
  LatencyStats out;
  out.count = static_cast<std::int64_t>(ns.size());
  if (ns.empty()) return out;
  std::sort(ns.begin(), ns.end());
  out.mean_ms = std::accumulate(ns.begin(), ns.end(), 0.0) / static_cast<double>(ns.size()) / 1e6;
  out.p50_ms = percentile_nearest_rank(ns, 50) / 1e6;
  out.p90_ms = percentile_nearest_rank(ns, 90) / 1e6;
  out.p99_ms = percentile_nearest_rank(ns, 99) / 1e6;
  return out;
}

nlohmann::json to_json(const LatencyStats& s) {
  if (s.count == 0) return {{"count", 0}, {"mean", nullptr}, {"p50", nullptr}, {"p90", nullptr}, {"p99", nullptr}};
  return {{"count", s.count}, {"mean", s.mean_ms}, {"p50", s.p50_ms}, {"p90", s.p90_ms}, {"p99", s.p99_ms}};
}

double percentile_nearest_rank(const std::vector<double>& sorted, std::int32_t percent) {
  assert(percent >= 0 && percent <= 100);
  if (sorted.empty()) return 0.0;
  const auto n = static_cast<std::int64_t>(sorted.size());
  // ⌈p·n/100⌉ in integers: no 0.99·100 = 98.999… surprises.
  const std::int64_t rank = std::max<std::int64_t>(1, (percent * n + 99) / 100);
  return sorted[static_cast<std::size_t>(rank - 1)];
}

void MetricsCollector::set_device_names(std::vector<std::string> names) {
  names_ = std::move(names);
}

void MetricsCollector::on_request_arrival(std::int64_t id, std::int64_t t) {
  requests_[id].arrival = t;
}

void MetricsCollector::on_request_admitted(std::int64_t id, std::int64_t t, std::int32_t dp_rank) {
  Request& r = requests_[id];
  r.admitted = t;
  r.rank = dp_rank;
}

void MetricsCollector::on_token(std::int64_t id, std::int64_t t) {
  requests_[id].tokens.push_back(t);
}

void MetricsCollector::on_request_finished(std::int64_t id, std::int64_t t) {
  requests_[id].finished = t;
}

void MetricsCollector::on_request_rejected(std::int64_t id, std::int64_t t) {
  requests_.erase(id);  // a rejected request produced no token: only its time counts
  if (!rejected_at_.empty() && t < rejected_at_.back()) {
    rejected_at_.insert(std::upper_bound(rejected_at_.begin(), rejected_at_.end(), t), t);
  } else {
    rejected_at_.push_back(t);
  }
}

void MetricsCollector::IntervalLog::append(Interval i) {
  if (!intervals.empty() && i.end < intervals.back().end) ordered = false;
  longest = std::max(longest, i.end - i.start);
  intervals.push_back(i);
}

std::vector<std::pair<std::int64_t, std::int64_t>> MetricsCollector::IntervalLog::overlapping(std::int64_t lo,
                                                                                             std::int64_t hi) const {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  auto first = intervals.begin(), last = intervals.end();
  if (ordered) {
    // Sorted by end: skip those that end before lo; stop where even the longest interval
    // would start after hi.
    first = std::lower_bound(intervals.begin(), intervals.end(), lo,
                             [](const Interval& i, std::int64_t t) { return i.end < t; });
    const std::int64_t stop = hi > std::numeric_limits<std::int64_t>::max() - longest ? hi : hi + longest;
    last = std::upper_bound(first, intervals.end(), stop, [](std::int64_t t, const Interval& i) { return t < i.end; });
  }
  for (auto it = first; it != last; ++it)
    if (it->end > lo && it->start < hi) out.emplace_back(it->start, it->end);
  return out;
}

std::int64_t MetricsCollector::IntervalLog::covered(std::int64_t lo, std::int64_t hi) const {
  if (!ordered) return sy::covered(overlapping(lo, hi), lo, hi);
  // One pass over the window's intervals, clipped, without copying them: while they come in
  // ascending (start, end) order (a device's busy and stall logs do) this is the union the
  // sorting path computes; one out of order, and the window takes that path.
  auto first = std::lower_bound(intervals.begin(), intervals.end(), lo,
                                [](const Interval& i, std::int64_t t) { return i.end < t; });
  const std::int64_t stop = hi > std::numeric_limits<std::int64_t>::max() - longest ? hi : hi + longest;
  const auto last =
      std::upper_bound(first, intervals.end(), stop, [](std::int64_t t, const Interval& i) { return t < i.end; });
  std::int64_t total = 0;
  std::int64_t reach = lo;  // everything before `reach` is already counted
  std::pair<std::int64_t, std::int64_t> previous{std::numeric_limits<std::int64_t>::min(),
                                                 std::numeric_limits<std::int64_t>::min()};
  for (auto it = first; it != last; ++it) {
    if (!(it->end > lo && it->start < hi)) continue;
    const std::pair<std::int64_t, std::int64_t> clipped{std::max(it->start, lo), std::min(it->end, hi)};
    if (clipped < previous) return sy::covered(overlapping(lo, hi), lo, hi);
    previous = clipped;
    const std::int64_t from = std::max(clipped.first, reach);
    if (clipped.second > from) {
      total += clipped.second - from;
      reach = clipped.second;
    }
  }
  return total;
}

void MetricsCollector::IntervalLog::forget_before(std::int64_t t) { forget_ended_before(intervals, ordered, t); }

void MetricsCollector::on_request(const RequestUpdate& u) {
  switch (u.phase) {
    case RequestPhase::Arrival: on_request_arrival(u.id, u.t_ns); break;
    case RequestPhase::Admitted: on_request_admitted(u.id, u.t_ns, u.rank); break;
    case RequestPhase::Token: on_token(u.id, u.t_ns); break;
    case RequestPhase::Finished: on_request_finished(u.id, u.t_ns); break;
    case RequestPhase::Rejected: on_request_rejected(u.id, u.t_ns); break;
  }
}

void MetricsCollector::forget_before(std::int64_t t) {
  for (auto it = requests_.begin(); it != requests_.end();) {
    if (it->second.finished >= 0 && it->second.finished <= t) {
      it = requests_.erase(it);
    } else {
      // A running request keeps its last token before t: the next ITL is measured from it.
      auto& tokens = it->second.tokens;
      const auto keep = std::lower_bound(tokens.begin(), tokens.end(), t);
      if (keep - tokens.begin() > 1) {
        tokens.erase(tokens.begin(), keep - 1);
        it->second.first_forgotten = true;
      }
      ++it;
    }
  }
  rejected_at_.erase(rejected_at_.begin(), std::lower_bound(rejected_at_.begin(), rejected_at_.end(), t));
  for (Device& d : devices_) {
    d.busy.forget_before(t);
    for (auto& reason : d.stall) reason.forget_before(t);
    forget_ended_before(d.executions, d.executions_ordered, t);
    d.traffic.forget_before(t);
  }
}

MetricsCollector::Device& MetricsCollector::add_device(std::int32_t index) {
  assert(index >= 0);
  if (devices_.size() <= static_cast<std::size_t>(index)) devices_.resize(static_cast<std::size_t>(index) + 1);
  return devices_[static_cast<std::size_t>(index)];
}

void MetricsCollector::on_device_busy(std::int32_t dev, std::int64_t start, std::int64_t end) {
  if (end <= start) return;
  device(dev).busy.add({start, end});
}

void MetricsCollector::on_device_stall(std::int32_t dev, StallReason reason, std::int64_t start, std::int64_t end) {
  if (end <= start) return;
  device(dev).stall[stall_reason_index(reason)].add({start, end});
}

void MetricsCollector::on_execution(std::int32_t dev, LayerKind /*kind*/, std::int32_t /*block*/,
                                    std::int32_t /*index*/, std::int32_t /*group*/, std::int64_t tokens,
                                    std::int64_t start_ns, std::int64_t end_ns) {
  Device& d = device(dev);
  if (end_ns > start_ns) d.busy.add({start_ns, end_ns});
  if (!d.executions.empty() && end_ns < d.executions.back().end) d.executions_ordered = false;
  d.executions.push_back({end_ns, tokens});
}

void MetricsCollector::on_shared_expert(std::int32_t dev, std::int32_t /*block*/, std::int32_t /*group*/,
                                        std::int64_t /*tokens*/, std::int64_t start_ns, std::int64_t end_ns) {
  on_device_busy(dev, start_ns, end_ns);  // busy; its rows were counted by the attention execution
}

void MetricsCollector::on_merge(std::int32_t dev, std::int32_t /*block*/, std::int64_t /*tokens*/,
                                std::int64_t start_ns, std::int64_t end_ns) {
  on_device_busy(dev, start_ns, end_ns);  // busy, but not an execution of a layer's rows
}

void MetricsCollector::on_stall(std::int32_t dev, StallReason reason, std::int64_t start_ns, std::int64_t end_ns) {
  on_device_stall(dev, reason, start_ns, end_ns);
}

void MetricsCollector::on_transfer(std::int32_t src, std::int32_t, std::int64_t tokens, std::int64_t,
                                   std::int64_t start_ns, std::int64_t) {
  Bucket& b = device(src).traffic.at(start_ns);
  ++b.transfers;
  b.transfer_rows += tokens;
}

void MetricsCollector::on_queue_wait(std::int32_t dev, const LayerId&, std::int64_t, std::int64_t waited_ns,
                                     std::int64_t at_ns) {
  Bucket& b = device(dev).traffic.at(at_ns);
  ++b.waits;
  b.waited_ns += waited_ns;
  b.longest_wait_ns = std::max(b.longest_wait_ns, waited_ns);
}

MetricsReport MetricsCollector::report(std::int64_t t_begin, std::int64_t t_end) const {
  MetricsReport out;
  out.t_begin_ns = t_begin;
  out.t_end_ns = t_end;
  out.window_s = static_cast<double>(std::max<std::int64_t>(0, t_end - t_begin)) / 1e9;
  const auto inside = [&](std::int64_t t) { return t > t_begin && t <= t_end; };

  std::vector<double> ttft, itl;
  for (const auto& [id, r] : requests_) {
    (void)id;
    for (std::size_t i = 0; i < r.tokens.size(); ++i) {
      const std::int64_t t = r.tokens[i];
      if (!inside(t)) continue;
      ++out.tokens_generated;
      if (i == 0) {
        if (r.arrival >= 0 && !r.first_forgotten) ttft.push_back(static_cast<double>(t - r.arrival));
      } else {
        itl.push_back(static_cast<double>(t - r.tokens[i - 1]));
      }
    }
    if (r.finished >= 0 && inside(r.finished)) ++out.requests_finished;
  }
  // Rejections in (t_begin, t_end], like every point event.
  out.requests_rejected = std::upper_bound(rejected_at_.begin(), rejected_at_.end(), t_end) -
                          std::upper_bound(rejected_at_.begin(), rejected_at_.end(), t_begin);
  out.ttft = latency_stats(std::move(ttft));
  out.itl = latency_stats(std::move(itl));
  if (out.window_s > 0) {
    out.tokens_per_s = static_cast<double>(out.tokens_generated) / out.window_s;
    out.requests_per_s = static_cast<double>(out.requests_finished) / out.window_s;
  }

  const std::size_t n = std::max(names_.size(), devices_.size());
  const std::int64_t span = t_end - t_begin;
  const auto fraction = [&](const IntervalLog& log) {
    if (span <= 0) return 0.0;
    return static_cast<double>(log.covered(t_begin, t_end)) / static_cast<double>(span);
  };
  for (std::size_t d = 0; d < n; ++d) {
    DeviceUsage u;
    u.name = d < names_.size() ? names_[d] : "dev" + std::to_string(d);
    if (d < devices_.size()) {
      u.busy = fraction(devices_[d].busy);
      for (std::size_t s = 0; s < kStallReasons.size(); ++s) u.stall[s] = fraction(devices_[d].stall[s]);
      double accounted = u.busy;
      for (double s : u.stall) accounted += s;
      if (span > 0) u.host = telemetry::host_share(accounted);
      std::int64_t rows = 0;
      const auto& ex = devices_[d].executions;
      auto it = devices_[d].executions_ordered
                    ? std::upper_bound(ex.begin(), ex.end(), t_begin,
                                       [](std::int64_t t, const Execution& e) { return t < e.end; })
                    : ex.begin();
      for (; it != ex.end(); ++it) {
        if (it->end > t_end) {
          if (devices_[d].executions_ordered) break;
          continue;
        }
        if (it->end <= t_begin) continue;
        ++u.executions;
        rows += it->tokens;
      }
      if (u.executions > 0) u.rows_per_execution = static_cast<double>(rows) / static_cast<double>(u.executions);
      if (out.window_s > 0) u.executions_per_s = static_cast<double>(u.executions) / out.window_s;
      std::int64_t carried = 0, waited = 0, longest = 0;
      const auto& buckets = devices_[d].traffic.buckets;
      // Buckets whose start lies in [t_begin, t_end).
      for (auto b = std::lower_bound(buckets.begin(), buckets.end(), t_begin,
                                     [](const Bucket& x, std::int64_t t) { return x.index * kBucketNs < t; });
           b != buckets.end() && b->index * kBucketNs < t_end; ++b) {
        u.transfers += b->transfers;
        carried += b->transfer_rows;
        u.queue_waits += b->waits;
        waited += b->waited_ns;
        longest = std::max(longest, b->longest_wait_ns);
      }
      if (u.transfers > 0) u.rows_per_transfer = static_cast<double>(carried) / static_cast<double>(u.transfers);
      if (u.queue_waits > 0) {
        u.queue_wait_mean_ms = static_cast<double>(waited) / static_cast<double>(u.queue_waits) / 1e6;
        u.queue_wait_max_ms = static_cast<double>(longest) / 1e6;
      }
    }
    out.devices.push_back(std::move(u));
  }
  return out;
}

void MetricsCollector::on_routed(std::int32_t block, std::int32_t expert, std::int32_t device, std::int64_t tokens,
                                 std::int64_t) {
  const auto b = static_cast<std::size_t>(block), e = static_cast<std::size_t>(expert),
             d = static_cast<std::size_t>(device);
  if (device >= 0 && d < routed_per_device_.size() && b < expert_load_.size() && e < expert_load_[b].size()) {
    routed_per_device_[d] += tokens;
    expert_load_[b][e] += tokens;
    return;
  }
  add_routed(block, expert, device, tokens);
}

void MetricsCollector::add_routed(std::int32_t block, std::int32_t expert, std::int32_t device, std::int64_t tokens) {
  if (device >= 0) {
    if (static_cast<std::size_t>(device) >= routed_per_device_.size()) routed_per_device_.resize(static_cast<std::size_t>(device) + 1, 0);
    routed_per_device_[static_cast<std::size_t>(device)] += tokens;
  }
  if (static_cast<std::size_t>(block) >= expert_load_.size()) expert_load_.resize(static_cast<std::size_t>(block) + 1);
  auto& row = expert_load_[static_cast<std::size_t>(block)];
  if (static_cast<std::size_t>(expert) >= row.size()) row.resize(static_cast<std::size_t>(expert) + 1, 0);
  row[static_cast<std::size_t>(expert)] += tokens;
}

std::vector<std::vector<std::int64_t>> MetricsCollector::expert_load() const {
  return expert_load_;
}

std::vector<std::int64_t> MetricsCollector::routed_per_device() const {
  return routed_per_device_;
}

nlohmann::json to_json(const MetricsReport& r) {
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceUsage& d : r.devices) {
    nlohmann::json stall = nlohmann::json::object();
    for (std::size_t s = 0; s < kStallReasons.size(); ++s) stall[std::string(stall_reason_name(kStallReasons[s]))] = d.stall[s];
    devices.push_back({{"name", d.name},
                       {"busy", d.busy},
                       {"stall", std::move(stall)},
                       {"host", d.host},
                       {"executions", d.executions},
                       {"rows_per_execution", d.rows_per_execution},
                       {"executions_per_s", d.executions_per_s},
                       {"transfers", d.transfers},
                       {"rows_per_transfer", d.rows_per_transfer},
                       {"queue_wait_ms", {{"count", d.queue_waits},
                                          {"mean", d.queue_wait_mean_ms},
                                          {"max", d.queue_wait_max_ms}}}});
  }
  return {{"window", {{"begin_ns", r.t_begin_ns}, {"end_ns", r.t_end_ns}, {"seconds", r.window_s}}},
          {"tokens_generated", r.tokens_generated},
          {"requests_finished", r.requests_finished},
          {"requests_rejected", r.requests_rejected},
          {"tokens_per_s", r.tokens_per_s},
          {"requests_per_s", r.requests_per_s},
          {"ttft_ms", to_json(r.ttft)},
          {"itl_ms", to_json(r.itl)},
          {"devices", std::move(devices)}};
}

std::string describe_prefix_cache(std::int64_t hits, std::int64_t queries) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "prefix cache: %lld of %lld prompt tokens from the cache (%.1f %%)",
                static_cast<long long>(hits), static_cast<long long>(queries),
                queries > 0 ? 100.0 * static_cast<double>(hits) / static_cast<double>(queries) : 0.0);
  return buf;
}

std::string format_table(const MetricsReport& r) {
  std::string out = render(
      {
          {"window", fixed(r.window_s, 3) + " s"},
          {"throughput", fixed(r.tokens_per_s, 1) + " tokens/s, " + fixed(r.requests_per_s, 2) + " requests/s"},
          {"generated", std::to_string(r.tokens_generated) + " tokens"},
          {"requests", std::to_string(r.requests_finished) + " finished, " + std::to_string(r.requests_rejected) +
                           " rejected"},
      },
      /*left=*/true);
  out += "\n" + render({{"latency (ms)", "n", "mean", "p50", "p99"}, latency_row("TTFT", r.ttft), latency_row("ITL", r.itl)});
  if (!r.devices.empty()) {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header = {"device", "busy"};
    for (StallReason s : kStallReasons) header.push_back("stall:" + std::string(stall_reason_name(s)));
    header.push_back("host");
    header.push_back("executions");
    header.push_back("rows/exec");
    header.push_back("exec/s");
    header.push_back("wait ms");
    header.push_back("transfers");
    header.push_back("rows/xfer");
    rows.push_back(std::move(header));
    for (const DeviceUsage& d : r.devices) {
      std::vector<std::string> row = {d.name, percent(d.busy)};
      for (double s : d.stall) row.push_back(percent(s));
      row.push_back(percent(d.host));
      row.push_back(std::to_string(d.executions));
      row.push_back(fixed(d.rows_per_execution, 1));
      row.push_back(fixed(d.executions_per_s, 0));
      row.push_back(fixed(d.queue_wait_mean_ms, 2));
      row.push_back(std::to_string(d.transfers));
      row.push_back(fixed(d.rows_per_transfer, 1));
      rows.push_back(std::move(row));
    }
    out += "\n" + render(rows);
  }
  return out;
}

}  // namespace sy
