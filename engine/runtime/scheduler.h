// A worker's scheduling decision as a pure object: given the tokens waiting in each drainable
// μ-queue, which layer runs next. No backend, clock or queue types: tested on plain grids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace sy {

// Tokens of a device's drainable μ-queues laid out blocks × columns (a column is an expert or
// an attention rank hosted by the device; the sampler is the extra last block). Zero means
// nothing runnable there.
struct QueueGrid {
  std::int32_t blocks = 0;
  std::int32_t columns = 0;
  std::vector<std::int64_t> tokens;  // [block * columns + column]

  void reset(std::int32_t b, std::int32_t c) {
    blocks = b;
    columns = c;
    tokens.assign(static_cast<std::size_t>(b) * static_cast<std::size_t>(c), 0);
  }
  std::int64_t& at(std::int32_t b, std::int32_t c) { return tokens[static_cast<std::size_t>(b * columns + c)]; }
  std::int64_t at(std::int32_t b, std::int32_t c) const { return tokens[static_cast<std::size_t>(b * columns + c)]; }
};

struct GridPick {
  std::int32_t block = 0;
  std::int32_t column = 0;
  bool operator==(const GridPick&) const = default;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // The queue to drain next, or nothing when every queue is empty.
  virtual std::optional<GridPick> pick(const QueueGrid& grid) = 0;
  virtual std::string name() const = 0;
};

struct SchedulerParams {
  std::string name = "defrag";  // defrag | mtfs | flfs
  std::int32_t lookahead = 3;   // defrag: blocks looked ahead (K in AMoE Algorithm 1)
  double decay = 1.0;           // defrag: weight δ^k of the k-th block ahead (see layouts/README.md)
};

// Errors name the unknown scheduler or the parameter out of range.
StatusOr<std::unique_ptr<Scheduler>> make_scheduler(const SchedulerParams& params);

}  // namespace sy
