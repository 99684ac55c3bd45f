#include "console/model/run_comparison.h"

#include <algorithm>
#include <limits>
#include <map>

namespace sy::console {

telemetry::RunProfile profile_model(const ConsoleModel& model, std::string label) {
  const SpanHistory& h = model.spans().history();
  std::vector<telemetry::SpanWindow> windows;
  for (std::int32_t d = 0; d < model.device_count(); ++d) {
    for (int l = 0; l < kLaneCount; ++l) {
      const WindowSeries* c = h.coarse(d, static_cast<telemetry::Lane>(l));
      if (c == nullptr) continue;
      for (std::size_t i = 0; i < c->size(); ++i) {
        const WindowTotals& t = (*c)[i];
        if (t.empty()) continue;
        telemetry::SpanWindow w;
        w.start_ns = c->begin_ns() + static_cast<std::int64_t>(i) * c->window_ns();
        w.window_ns = c->window_ns();
        w.device = d;
        w.lane = static_cast<telemetry::Lane>(l);
        w.spans = t.spans;
        w.tokens = t.tokens;
        w.sampled_tokens = t.sampled_tokens;
        w.kind_ns = t.kind_ns;
        w.stall_ns = t.stall_ns;
        windows.push_back(w);
      }
    }
  }
  std::vector<std::string> names;
  for (std::int32_t d = 0; d < model.device_count(); ++d)
    names.push_back(model.meta() ? model.meta()->device_name(d) : "device" + std::to_string(d));
  telemetry::RunProfile p =
      telemetry::profile_windows(windows, names, std::move(label), std::max(model.begin_ns(), h.begin_ns()),
                                 std::max(model.end_ns(), model.begin_ns() + 1));
  // Queued tokens: each device's μ-queues summed at 200 instants over the samples held.
  const QueueStore& q = model.queues();
  std::map<std::int32_t, std::vector<QueueKey>> by_device;
  std::int64_t first = std::numeric_limits<std::int64_t>::max(), last = std::numeric_limits<std::int64_t>::min();
  for (const QueueKey& key : q.keys()) {
    by_device[key.device].push_back(key);
    if (const auto* series = q.series(key); series != nullptr && !series->empty()) {
      first = std::min(first, series->front().t_ns);
      last = std::max(last, series->back().t_ns);
    }
  }
  if (last > first) {
    constexpr int kInstants = 200;
    for (telemetry::DeviceProfile& d : p.devices) {
      auto it = by_device.find(d.device);
      if (it == by_device.end()) continue;
      double sum = 0;
      for (int k = 0; k < kInstants; ++k) {
        const std::int64_t t = first + (last - first) * k / (kInstants - 1);
        for (const QueueKey& key : it->second) sum += static_cast<double>(q.depth_at(key, t));
      }
      d.mean_queued_tokens = sum / kInstants;
    }
  }
  return p;
}

}  // namespace sy::console
