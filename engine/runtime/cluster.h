// The workers of one deployment wired to their executors and a transport on one event loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/runtime/event_loop.h"
#include "engine/runtime/executor.h"
#include "engine/runtime/runtime_observer.h"
#include "engine/runtime/runtime_policy.h"
#include "engine/runtime/topology.h"
#include "engine/runtime/transport.h"
#include "engine/runtime/worker.h"

namespace sy {

class Cluster {
 public:
  // Makes the executor of a device; attention_rank says whether it hosts a DP rank (KV cache).
  using ExecutorFactory = std::function<std::unique_ptr<Executor>(std::int32_t device, bool attention_rank)>;

  Cluster(Topology topology, EventLoop& loop, const ExecutorFactory& make_executor, LinkModel link,
          std::int64_t bytes_per_row, RuntimeObserver* observer, Worker::Hooks hooks);

  const Topology& topology() const { return topology_; }
  EventLoop& loop() { return loop_; }
  Executor& rank_executor(std::int32_t rank) { return *executors_[topology_.rank_device[rank]]; }
  Worker& worker(std::int32_t device) { return *workers_[device]; }
  std::int32_t num_devices() const { return topology_.num_devices; }

  // Hands the coordinator's block-0 rows of one rank to its worker.
  void inject(std::int32_t rank, std::int32_t group, TokenBatch rows);
  // No packet queued, pooled, executing or on a link anywhere: a safe point.
  bool quiescent() const;
  // Only at a safe point (asserted).
  void set_policy(const RuntimePolicy& policy);
  // Replaces the expert placement (validated by Topology::validate_placement). Only at a safe
  // point (asserted): the workers rebuild their μ-queues for the experts they now host.
  void set_placement(ExpertPlacement placement);
  // Closes every worker's open stall interval (end of a measurement window).
  void flush_stalls();

 private:
  Topology topology_;
  EventLoop& loop_;
  std::vector<std::unique_ptr<Executor>> executors_;
  BatchRecycler recycler_;
  std::unique_ptr<LoopTransport> transport_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace sy
