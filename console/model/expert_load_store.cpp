#include "console/model/expert_load_store.h"

#include <algorithm>

namespace sy::console {

void ExpertLoadStore::add(const telemetry::ExpertLoad& record) {
  if (record.window_end_ns < record.window_start_ns) return;
  auto same = [&](const LoadWindow& w) {
    return w.start_ns == record.window_start_ns && w.end_ns == record.window_end_ns;
  };
  if (!windows_.empty() && same(windows_.back())) {
    windows_.back().records.push_back(record);
    return;
  }
  auto pos = std::upper_bound(windows_.begin(), windows_.end(), record.window_start_ns,
                              [](std::int64_t t, const LoadWindow& w) { return t < w.start_ns; });
  if (pos != windows_.begin() && same(*(pos - 1))) {
    (pos - 1)->records.push_back(record);
    return;
  }
  if (pos == windows_.begin() && windows_.size() >= max_windows_) return;  // older than all we keep
  windows_.insert(pos, LoadWindow{record.window_start_ns, record.window_end_ns, {record}});
  while (windows_.size() > max_windows_) windows_.pop_front();
}

void ExpertLoadStore::trim(std::int64_t cutoff_ns) {
  // Keep the newest window even when it is older than the cutoff: the skew view shows it.
  while (windows_.size() > 1 && windows_.front().end_ns < cutoff_ns) windows_.pop_front();
}

const LoadWindow* ExpertLoadStore::at(std::int64_t t_ns) const {
  auto pos = std::upper_bound(windows_.begin(), windows_.end(), t_ns,
                              [](std::int64_t t, const LoadWindow& w) { return t < w.start_ns; });
  if (pos == windows_.begin()) return nullptr;
  --pos;
  if (t_ns < pos->end_ns) return &*pos;
  // t lies after this window's end: the newest window ending at or before t.
  const LoadWindow* best = nullptr;
  for (auto it = std::make_reverse_iterator(pos + 1); it != windows_.rend(); ++it) {
    if (it->end_ns <= t_ns) {
      best = &*it;
      break;
    }
  }
  return best;
}

}  // namespace sy::console
