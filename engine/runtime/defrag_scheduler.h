// AMoE's defragging scheduler (Algorithm 1): a queue's tokens plus a decayed lookahead over the
// token density of the next blocks, so waves of tokens consolidate without starving stragglers.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/runtime/scheduler.h"

namespace sy {

class DefragScheduler final : public Scheduler {
 public:
  DefragScheduler(std::int32_t lookahead, double decay);
  std::optional<GridPick> pick(const QueueGrid& grid) override;
  std::string name() const override { return "defrag"; }

 private:
  std::int32_t lookahead_;
  double decay_;
  // δ^k for k = 1..K, multiplied up in the order Algorithm 1 does, so scores stay bit-identical.
  std::vector<double> weights_;
};

}  // namespace sy
