// Most-tokens-first-serve: drain the fullest queue (AMoE's first strawman).
#pragma once

#include "engine/runtime/scheduler.h"

namespace sy {

class MtfsScheduler final : public Scheduler {
 public:
  std::optional<GridPick> pick(const QueueGrid& grid) override;
  std::string name() const override { return "mtfs"; }
};

}  // namespace sy
