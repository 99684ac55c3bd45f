// When an asynchronous expert μ-queue may run: a minimum batch and a maximum wait derived from
// the execution's cost curve, so that no execution is launched that costs almost as much as a
// full one for a fraction of the rows. A pure object: tested on plain cost functions.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>

namespace sy {

struct MuQueueGate {
  // A queue holding at least min_rows may always run.
  std::int64_t min_rows = 1;
  // A smaller queue may run once its oldest row has waited this long.
  std::int64_t max_wait_ns = 0;

  bool open(std::int64_t rows, std::int64_t oldest_ns, std::int64_t now_ns) const {
    return rows >= min_rows || now_ns - oldest_ns >= max_wait_ns;
  }
  // When a queue below min_rows whose oldest row came at oldest_ns opens by waiting.
  std::int64_t opens_at(std::int64_t oldest_ns) const {
    return max_wait_ns > std::numeric_limits<std::int64_t>::max() - oldest_ns ? std::numeric_limits<std::int64_t>::max()
                                                                               : oldest_ns + max_wait_ns;
  }
  // A gate that never holds anything back.
  bool trivial() const { return min_rows <= 1 || max_wait_ns <= 0; }

  // The rule, from `cost(rows)` (ns of one execution of that many rows; non-decreasing):
  // min_rows is the most rows an execution takes for at most `slack` more than one row's
  // (1 + slack)·cost(1): below it the execution is bound by reading the expert's weights and
  // rows ride for free, so launching fewer wastes the read. max_wait_ns is cost(min_rows), the
  // ski-rental bound: a queue never waits longer than the execution it would save, so the
  // latency a row pays in the gate is at most one such execution. Searched up to max_rows.
  static MuQueueGate from_cost(const std::function<std::int64_t(std::int64_t rows)>& cost, double slack = 0.1,
                               std::int64_t max_rows = std::int64_t{1} << 16);
};

}  // namespace sy
