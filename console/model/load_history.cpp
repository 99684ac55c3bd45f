#include "console/model/load_history.h"

#include <algorithm>
#include <tuple>

namespace sy::console {
namespace {

bool before(const telemetry::ExpertLoad& a, const telemetry::ExpertLoad& b) {
  return std::tie(a.block, a.expert, a.device) < std::tie(b.block, b.expert, b.device);
}

}  // namespace

void LoadFold::add(const telemetry::ExpertLoad& r) {
  start_ns = records.empty() && end_ns == 0 ? r.window_start_ns : std::min(start_ns, r.window_start_ns);
  end_ns = std::max(end_ns, r.window_end_ns);
  auto pos = std::lower_bound(records.begin(), records.end(), r, before);
  if (pos != records.end() && !before(r, *pos)) {
    pos->tokens += r.tokens;
    return;
  }
  telemetry::ExpertLoad kept = r;
  kept.window_start_ns = kept.window_end_ns = 0;
  records.insert(pos, kept);
}

void LoadFold::merge(const LoadFold& later) {
  if (later.records.empty() && later.end_ns == 0) return;
  if (records.empty() && end_ns == 0) {
    *this = later;
    return;
  }
  start_ns = std::min(start_ns, later.start_ns);
  end_ns = std::max(end_ns, later.end_ns);
  std::vector<telemetry::ExpertLoad> out;
  out.reserve(records.size() + later.records.size());
  auto a = records.cbegin();
  auto b = later.records.cbegin();
  while (a != records.cend() || b != later.records.cend()) {
    if (b == later.records.cend() || (a != records.cend() && before(*a, *b))) {
      out.push_back(*a++);
    } else if (a == records.cend() || before(*b, *a)) {
      out.push_back(*b++);
    } else {
      out.push_back(*a++);
      out.back().tokens += (b++)->tokens;
    }
  }
  records = std::move(out);
}

void LoadHistory::add(const telemetry::ExpertLoad& r) {
  if (r.window_end_ns < r.window_start_ns) return;
  if (LoadFold* w = windows_.at(r.window_start_ns)) w->add(r);
}

std::optional<LoadWindow> LoadHistory::at(std::int64_t t_ns) const {
  if (windows_.empty()) return std::nullopt;
  std::size_t i = std::min(windows_.index_at(t_ns), windows_.size() - 1);
  if (t_ns < windows_.begin_ns()) return std::nullopt;
  // Back to the last window that holds anything (a quiet stretch folds nothing).
  while (windows_[i].end_ns == 0) {
    if (i == 0) return std::nullopt;
    --i;
  }
  const LoadFold& f = windows_[i];
  LoadWindow w{f.start_ns, f.end_ns, f.records};
  for (auto& r : w.records) {
    r.window_start_ns = f.start_ns;
    r.window_end_ns = f.end_ns;
  }
  return w;
}

std::size_t LoadHistory::held_bytes() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < windows_.size(); ++i)
    n += sizeof(LoadFold) + windows_[i].records.capacity() * sizeof(telemetry::ExpertLoad);
  return n;
}

}  // namespace sy::console
