// Tail-first: drain the block at the tail of the train of occupied blocks, the one right after
// the widest run of empty blocks around the ring of blocks (the sampler's block wraps to block
// 0), so that the tokens furthest behind catch up with the ones ahead and waves merge; within
// it, the fullest queue. FLFS with the ring's break put where the tokens are not; with every
// block occupied there is no gap and it takes the lowest block, as FLFS does (README: measured
// on the sim, not proven free of FLFS's livelock under steady arrivals).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/runtime/scheduler.h"

namespace sy {

class TailScheduler final : public Scheduler {
 public:
  std::optional<GridPick> pick(const QueueGrid& grid) override;
  std::string name() const override { return "tail"; }

 private:
  std::vector<std::int32_t> occupied_;  // blocks with a pickable token, ascending
};

}  // namespace sy
