#include "telemetry/trace_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "telemetry/host_share.h"

namespace sy::telemetry {

double RunProfile::sampled_per_s() const {
  double s = 0;
  for (const auto& d : devices) s += d.sampled_per_s;
  return s;
}

RunProfile profile_windows(const std::vector<SpanWindow>& windows, std::vector<std::string> names, std::string label,
                           std::int64_t t0, std::int64_t t1) {
  RunProfile p;
  p.label = std::move(label);
  struct Sum {
    SpanWindow compute, send;
    bool seen = false;
  };
  std::map<std::int32_t, Sum> by_device;
  std::int64_t begin = TraceReader::kMax, end = TraceReader::kMin;
  for (const SpanWindow& w : windows) {
    if (w.end_ns() <= t0 || w.start_ns >= t1) continue;
    begin = std::min(begin, std::max(w.start_ns, t0));
    end = std::max(end, std::min(w.end_ns(), t1));
    Sum& s = by_device[w.device];
    s.seen = true;
    if (w.lane == Lane::Compute) s.compute.merge(w);
    if (w.lane == Lane::Send) s.send.merge(w);
  }
  if (by_device.empty()) return p;
  p.begin_ns = begin;
  p.end_ns = end;
  const double seconds = static_cast<double>(end - begin) / 1e9;
  const double ns = static_cast<double>(end - begin);
  for (const auto& [device, s] : by_device) {
    DeviceProfile d;
    d.device = device;
    d.name = device >= 0 && static_cast<std::size_t>(device) < names.size() && !names[static_cast<std::size_t>(device)].empty()
                 ? names[static_cast<std::size_t>(device)]
                 : "device" + std::to_string(device);
    d.rows_per_s = static_cast<double>(s.compute.tokens) / seconds;
    d.sampled_per_s = static_cast<double>(s.compute.sampled_tokens) / seconds;
    d.busy_share = static_cast<double>(s.compute.busy_ns()) / ns;
    d.stall_share = static_cast<double>(s.compute.stalled_ns()) / ns;
    d.host_share = host_share(d.busy_share + d.stall_share);
    for (std::size_t r = 0; r < kStallReasons; ++r) d.stall_by_reason[r] = static_cast<double>(s.compute.stall_ns[r]) / ns;
    d.mean_queued_tokens = static_cast<double>(s.compute.queue_token_ns) / ns;
    d.link_busy_share = static_cast<double>(s.send.busy_ns()) / ns;
    p.devices.push_back(d);
  }
  return p;
}

StatusOr<RunProfile> profile_trace(const TraceReader& reader, std::string label, std::int64_t t0, std::int64_t t1) {
  std::vector<SpanWindow> windows;
  std::int64_t spans_end = TraceReader::kMin;  // from spans: the latest span's end
  bool from_windows = reader.has_span_windows();
  if (from_windows) {
    auto w = reader.span_windows(t0, t1);
    if (!w.ok()) return w.status();
    windows = std::move(*w);
  }
  if (windows.empty()) {
    // An older recording (or one whose writer died before its first window): add them up here.
    from_windows = false;
    auto spans = reader.spans(t0, t1);
    if (!spans.ok()) return spans.status();
    auto queues = reader.queue_samples(t0, t1);
    if (!queues.ok()) return queues.status();
    SpanWindowAccumulator acc;
    // Queue samples and spans in time order, so that each device's queue integral is exact.
    std::size_t q = 0;
    for (const Span& s : *spans) {
      while (q < queues->size() && (*queues)[q].t_ns <= s.start_ns) acc.add((*queues)[q++]);
      acc.add(s);
    }
    while (q < queues->size()) acc.add((*queues)[q++]);
    spans_end = acc.latest_ns();
    acc.close_before(acc.latest_ns(), windows);
    acc.close_all(windows);
  }
  // The run's own bounds, so that its first and last windows (partly before and after it) do
  // not dilute the shares.
  const std::int64_t b = std::max(t0, reader.start_ns());
  std::int64_t e = std::min(t1, reader.end_ns());
  // A recording whose writer was killed holds spans only up to its last committed blocks while
  // its request events run on: the shares are of the time the spans cover, or the time past
  // them would read as host time.
  if (!recording_complete(reader.metadata())) {
    std::int64_t covered = spans_end;
    if (from_windows)
      for (const SpanWindow& w : windows) covered = std::max(covered, w.start_ns + w.window_ns);
    if (covered > b) e = std::min(e, covered);
  }
  RunProfile p = profile_windows(windows, reader.device_names(), std::move(label), b, e > b ? e : b + 1);
  p.from_windows = from_windows;
  return p;
}

std::vector<DeviceDelta> match_devices(const RunProfile& a, const RunProfile& b) {
  std::map<std::int32_t, DeviceDelta> m;
  for (const auto& d : a.devices) {
    m[d.device].device = d.device;
    m[d.device].name = d.name;
    m[d.device].a = &d;
  }
  for (const auto& d : b.devices) {
    m[d.device].device = d.device;
    if (m[d.device].name.empty()) m[d.device].name = d.name;
    m[d.device].b = &d;
  }
  std::vector<DeviceDelta> out;
  for (auto& [k, v] : m) out.push_back(v);
  return out;
}

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string ratio(double a, double b) {
  if (a <= 0) return b <= 0 ? "-" : "new";
  return fmt("%.2fx", b / a);
}

std::string points(double a, double b) { return fmt("%+.1f", 100.0 * (b - a)); }

}  // namespace

std::string format_comparison(const RunProfile& a, const RunProfile& b) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "A: %s (%.1f s%s)\nB: %s (%.1f s%s)\n", a.label.c_str(),
                static_cast<double>(a.end_ns - a.begin_ns) / 1e9, a.from_windows ? "" : ", windows computed from spans",
                b.label.c_str(), static_cast<double>(b.end_ns - b.begin_ns) / 1e9,
                b.from_windows ? "" : ", windows computed from spans");
  out += line;
  std::snprintf(line, sizeof line, "output tokens/s: A %.1f, B %.1f, B/A %s\n\n", a.sampled_per_s(), b.sampled_per_s(),
                ratio(a.sampled_per_s(), b.sampled_per_s()).c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-14s %12s %12s %7s | %6s %6s %6s | %6s %6s %6s | %8s %8s %7s | %s\n", "device",
                "rows/s A", "rows/s B", "B/A", "busy A", "busy B", "pts", "stall A", "stall B", "pts", "queue A",
                "queue B", "B/A", "stalls B-A by reason (pts)");
  out += line;
  for (const DeviceDelta& d : match_devices(a, b)) {
    const DeviceProfile none;
    const DeviceProfile& x = d.a != nullptr ? *d.a : none;
    const DeviceProfile& y = d.b != nullptr ? *d.b : none;
    std::string reasons;
    for (std::size_t r = 1; r < kStallReasons; ++r) {
      const double delta = y.stall_by_reason[r] - x.stall_by_reason[r];
      if (std::abs(delta) < 0.0005) continue;
      if (!reasons.empty()) reasons += ", ";
      reasons += std::string(stall_reason_name(static_cast<StallReason>(r))) + " " + points(x.stall_by_reason[r], y.stall_by_reason[r]);
    }
    // Host time changes as stalls do, and a real backend's may be most of what moved.
    if (std::abs(y.host_share - x.host_share) >= 0.0005) {
      if (!reasons.empty()) reasons += ", ";
      reasons += "host " + points(x.host_share, y.host_share);
    }
    const std::string name = d.name + (d.a == nullptr ? " (B only)" : d.b == nullptr ? " (A only)" : "");
    std::snprintf(line, sizeof line, "%-14s %12.0f %12.0f %7s | %5.1f%% %5.1f%% %6s | %6.1f%% %6.1f%% %6s | %8.1f %8.1f %7s | %s\n",
                  name.c_str(), x.rows_per_s, y.rows_per_s, ratio(x.rows_per_s, y.rows_per_s).c_str(), 100 * x.busy_share,
                  100 * y.busy_share, points(x.busy_share, y.busy_share).c_str(), 100 * x.stall_share,
                  100 * y.stall_share, points(x.stall_share, y.stall_share).c_str(), x.mean_queued_tokens,
                  y.mean_queued_tokens, ratio(x.mean_queued_tokens, y.mean_queued_tokens).c_str(),
                  reasons.empty() ? "-" : reasons.c_str());
    out += line;
  }
  return out;
}

}  // namespace sy::telemetry
