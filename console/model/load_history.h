// Expert load over the whole run: the engine's load windows folded into windows that double in
// length as the run ages (folding_windows.h), so the skew view can show any moment of an
// hour-long run from bounded memory; the recent windows stay exact in ExpertLoadStore.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "console/model/expert_load_store.h"
#include "console/model/folding_windows.h"
#include "telemetry/events.h"

namespace sy::console {

struct LoadFold {
  std::int64_t start_ns = 0, end_ns = 0;     // the engine windows folded in (0, 0 when none)
  std::vector<telemetry::ExpertLoad> records;  // ordered by (block, expert, device); tokens summed
  void add(const telemetry::ExpertLoad& r);
  void merge(const LoadFold& later);
};

class LoadHistory {
 public:
  static constexpr std::int64_t kWindowNs = 1'000'000'000;
  // Each window holds a record per (block, expert, replica): the demo's 1 s windows fold to 16 s
  // over an hour.
  static constexpr std::size_t kMaxWindows = 256;

  void add(const telemetry::ExpertLoad& r);
  void clear() { windows_.clear(kWindowNs); }
  std::int64_t window_ns() const { return windows_.window_ns(); }
  // The folded window holding t, else the last one before t, as a load window spanning the
  // engine windows folded into it; nullopt when none.
  std::optional<LoadWindow> at(std::int64_t t_ns) const;
  std::size_t held_bytes() const;

 private:
  FoldingWindows<LoadFold> windows_{kWindowNs, kMaxWindows};
};

}  // namespace sy::console
