// The other processes of a multi-process deployment, as the cluster of the process that runs
// the coordinator sees them: how a change made at a safe point becomes one atomic step of every
// process. One process has none; engine/dist implements it over its control channel.
#pragma once

#include <functional>

#include "engine/runtime/placement.h"
#include "engine/runtime/runtime_policy.h"
#include "engine/runtime/sequence.h"
#include "engine/structured/guide.h"

namespace sy {

class ClusterPeers {
 public:
  virtual ~ClusterPeers() = default;
  // Called with this process at its safe point. Drains: waits until every other process is at
  // its safe point too and no shipment is between processes (asking again while one is not);
  // then runs `apply_here`, applies `policy` (and `placement`, when given) on every other
  // process, and runs `released` on this process's loop once all of them have acknowledged.
  // Only then may work resume.
  virtual void apply(std::function<void()> apply_here, const RuntimePolicy& policy, const Placement* placement,
                     std::function<void()> released) = 0;
  // An attention rank whose device runs in process `process` admitted a request (its block
  // table and sampling in `context`) or released it: that process's mirror of the rank's KV
  // block manager follows, ahead of the request's next rows (messages between two processes
  // arrive in order). `guide`: a guided request's grammar and vocabulary (null: none), which
  // the process's rank applies to its draws.
  virtual void open_sequence(std::int32_t process, std::int32_t rank, const SequenceContext& context,
                             const structured::GuideSpec* guide) = 0;
  virtual void close_sequence(std::int32_t process, std::int32_t rank, std::int64_t request) = 0;
};

}  // namespace sy
