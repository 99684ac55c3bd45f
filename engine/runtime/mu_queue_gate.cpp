#include "engine/runtime/mu_queue_gate.h"

#include <cmath>

namespace sy {

MuQueueGate MuQueueGate::from_cost(const std::function<std::int64_t(std::int64_t rows)>& cost, double slack,
                                   std::int64_t max_rows) {
  MuQueueGate g;
  const std::int64_t one = cost(1);
  if (one <= 0 || max_rows < 1) return g;  // a free execution wastes nothing: no gate
  const double limit = (1.0 + slack) * static_cast<double>(one);
  // cost is non-decreasing: the largest n with cost(n) <= limit, by doubling then bisection.
  std::int64_t lo = 1, hi = 2;
  while (hi <= max_rows && static_cast<double>(cost(hi)) <= limit) {
    lo = hi;
    hi *= 2;
  }
  if (hi > max_rows) hi = max_rows + 1;
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (static_cast<double>(cost(mid)) <= limit ? lo : hi) = mid;
  }
  g.min_rows = lo;
  g.max_wait_ns = lo > 1 ? cost(lo) : 0;
  return g;
}

}  // namespace sy
