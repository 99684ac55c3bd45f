// The charts' window summaries over the whole run: the engine's windows folded into windows that
// double in length as the run ages (folding_windows.h); the recent windows stay exact in
// SummaryStore. Rates, fractions and levels of a folded window are its windows' means weighted
// by their duration; latency percentiles are weighted by their windows' counts (an
// approximation: percentiles do not add, and the folded p99 is not the p99 of the union).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "console/model/folding_windows.h"
#include "console/model/summary_store.h"

namespace sy::console {

struct SummaryFold {
  SummaryPoint point;
  bool any = false;
  void merge(const SummaryFold& later);
};

class SummaryHistory {
 public:
  static constexpr std::int64_t kWindowNs = 1'000'000'000;
  // A day of the engine's 1 s windows would be 86 400 points: past 4096 (68 min) they fold.
  static constexpr std::size_t kMaxWindows = 4096;

  void add(const SummaryPoint& p);
  void clear() { windows_.clear(kWindowNs); }
  std::int64_t window_ns() const { return windows_.window_ns(); }
  // The folded points ending at or before `until_ns`, in time order (quiet windows skipped).
  std::vector<const SummaryPoint*> points(std::int64_t until_ns) const;
  std::size_t held_bytes() const;

 private:
  FoldingWindows<SummaryFold> windows_{kWindowNs, kMaxWindows};
};

// Folds `later` into `into` (the charts' meaning of a longer window; see above).
void fold_summary(SummaryPoint& into, const SummaryPoint& later);

}  // namespace sy::console
