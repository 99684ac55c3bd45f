#include "engine/runtime/scheduler.h"

#include "engine/runtime/defrag_scheduler.h"
#include "engine/runtime/flfs_scheduler.h"
#include "engine/runtime/mtfs_scheduler.h"
#include "engine/runtime/policy_spec.h"
#include "engine/runtime/tail_scheduler.h"

namespace sy {

StatusOr<std::unique_ptr<Scheduler>> make_scheduler(const SchedulerParams& p) {
  if (p.name == "defrag") {
    if (p.lookahead < 0 || p.lookahead > kMaxLookahead)
      return Status::Error("defrag lookahead must be in [0, " + std::to_string(kMaxLookahead) + "], got " +
                           std::to_string(p.lookahead));
    if (!(p.decay > 0 && p.decay <= 1)) return Status::Error("defrag decay must be in (0, 1], got " + std::to_string(p.decay));
    return std::unique_ptr<Scheduler>(new DefragScheduler(p.lookahead, p.decay));
  }
  if (p.name == "mtfs") return std::unique_ptr<Scheduler>(new MtfsScheduler());
  if (p.name == "flfs") return std::unique_ptr<Scheduler>(new FlfsScheduler());
  if (p.name == "tail") return std::unique_ptr<Scheduler>(new TailScheduler());
  return Status::Error("unknown scheduler '" + p.name + "' (expected defrag, mtfs, flfs or tail)");
}

QueueGrid QueueGrid::from(std::int32_t blocks, std::int32_t columns, std::vector<std::int64_t> tokens) {
  QueueGrid g;
  g.reset(blocks, columns);
  for (std::size_t i = 0; i < tokens.size() && i < g.tokens_.size(); ++i) g.set(i, tokens[i]);
  return g;
}

}  // namespace sy
