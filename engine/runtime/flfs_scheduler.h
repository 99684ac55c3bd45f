// First-layer-first-serve: drain the earliest block that has tokens (AMoE's second strawman);
// within it, the fullest queue.
#pragma once

#include "engine/runtime/scheduler.h"

namespace sy {

class FlfsScheduler final : public Scheduler {
 public:
  std::optional<GridPick> pick(const QueueGrid& grid) override;
  std::string name() const override { return "flfs"; }
};

}  // namespace sy
