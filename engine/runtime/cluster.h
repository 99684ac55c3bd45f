// The workers of one deployment wired to their executors, a transport and the attention ranks'
// KV block managers, on one event loop.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <optional>
#include <vector>

#include "engine/kv/kv_block_manager.h"
#include "engine/runtime/cluster_peers.h"
#include "engine/runtime/event_loop.h"
#include "engine/runtime/executor.h"
#include "engine/runtime/expert_residency.h"
#include "engine/runtime/runtime_observer.h"
#include "engine/runtime/runtime_policy.h"
#include "engine/runtime/topology.h"
#include "engine/runtime/transport.h"
#include "engine/runtime/worker.h"

namespace sy {

class Cluster {
 public:
  // Makes the executor of a device whose completions go to `loop`; attention_rank says whether
  // it hosts a DP rank (and so needs KV storage).
  using ExecutorFactory =
      std::function<std::unique_ptr<Executor>(std::int32_t device, bool attention_rank, EventLoop& loop)>;
  // KV pages of each attention rank.
  struct KvShape {
    std::int32_t pages_per_rank = 0;
    std::int32_t page_size = 16;
  };

  // `process`: which process of a multi-process deployment this is (topology.device_process);
  // only its devices get an executor and a worker here.
  Cluster(Topology topology, EventLoop& loop, const ExecutorFactory& make_executor,
          const TransportFactory& make_transport, KvShape kv, RuntimeObserver* observer, Worker::Hooks hooks,
          std::int32_t process = 0);
  // Finishes every executor's work first: a device's stream may still run an execution when
  // the loop stops (a service ends on a signal), and that execution reads its worker's batches
  // and the KV caches, which go before the executors.
  ~Cluster();

  const Topology& topology() const { return topology_; }
  EventLoop& loop() { return loop_; }
  // The KV block manager of an attention rank (the coordinator reads its free pages).
  KvBlockManager& kv(std::int32_t rank) { return *kv_[static_cast<std::size_t>(rank)]; }
  const KvBlockManager& kv(std::int32_t rank) const { return *kv_[static_cast<std::size_t>(rank)]; }
  // Admits a request to an attention rank's KV block manager (false, nothing taken, when its
  // pages are not free) and releases it; when the rank's device runs in another process, that
  // process's mirror of the manager follows through the peers.
  // `prompt`: for a rank's prefix cache, when enabled, and a repetition penalty; `logit_bias`:
  // the request's (KvBlockManager::admit).
  // `guide`: guided decoding (KvBlockManager::admit); only for a rank in this process (the
  // API refuses guided requests on deployments with remote attention ranks).
  bool admit(std::int32_t rank, std::int64_t request, std::int64_t positions, const SamplingSpec& sampling,
             std::span<const std::int32_t> prompt = {}, std::span<const kernels::TokenBias> logit_bias = {},
             const std::shared_ptr<const structured::GuideSpec>& guide = nullptr);
  void release(std::int32_t rank, std::int64_t request);
  // Whether an attention rank's device runs in another process than this one.
  bool remote_rank(std::int32_t rank) const {
    return topology_.process_of(topology_.rank_device[static_cast<std::size_t>(rank)]) != process_;
  }
  // The hooks this process's workers report sampled tokens to (the coordinator's unless
  // set_hooks replaced them), and their replacement: before the first execution.
  const Worker::Hooks& hooks() const { return hooks_; }
  void set_hooks(Worker::Hooks hooks);
  Worker& worker(std::int32_t device) { return *workers_[device]; }
  // Whether the device's worker runs in this process (always, in a one-process deployment).
  bool local(std::int32_t device) const { return workers_[static_cast<std::size_t>(device)] != nullptr; }
  std::int32_t process() const { return process_; }
  Transport& transport() { return *transport_; }
  std::int32_t num_devices() const { return topology_.num_devices; }

  // Hands the coordinator's block-0 rows of one rank to its worker.
  void inject(std::int32_t rank, std::int32_t group, TokenBatch rows);
  // No packet queued, pooled, executing or on a link anywhere in this process: a safe point
  // (of the whole deployment once the peers, if any, agree: apply_at_safe_point).
  bool quiescent() const;
  // The other processes, when the deployment spans several (set by engine/dist on the process
  // that runs the coordinator). Not owned.
  void set_peers(ClusterPeers* peers) { peers_ = peers; }
  // At a safe point of this process: applies the placement (when given) and the policy here
  // and on every peer, then runs `released` (at once without peers; once all have
  // acknowledged with them).
  void apply_at_safe_point(const RuntimePolicy& policy, std::optional<Placement> placement,
                           std::function<void()> released);
  // Only at a safe point (asserted).
  void set_policy(const RuntimePolicy& policy);
  // Replaces the expert placement (checked by Placement::check_shape and validate). Only at a safe
  // point (asserted): the workers rebuild their μ-queues for the experts they now host; weights
  // the placement no longer puts on a device are freed there (unless a staged placement still
  // wants them), and weights it needs but no copy brought (a device of another process) are
  // loaded from the host's copy.
  void set_placement(Placement placement);

  // Placement that moves weights: starts copying, on every device of this process, the expert
  // weights `placement` puts there and the device lacks (serving goes on meanwhile); `ready`
  // runs on the loop once every copy started so far has arrived (never from inside this call).
  // Refused, starting nothing, when a device has no room (ExpertResidency::plan). Returns the
  // copies started, empty when none was needed. Devices of other processes load from their
  // host's copy when the placement is applied.
  StatusOr<std::vector<WeightCopy>> stage_weights(const Placement& placement, std::function<void()> ready);
  // Copies started and not yet arrived.
  bool copying() const { return !copies_.empty(); }
  std::vector<WeightCopy> copies_in_flight() const;
  const ExpertResidency& residency() const { return residency_; }
  // Copies prefer a source on the target's node (of this many devices; 0: one node).
  void set_devices_per_node(std::int32_t n) { residency_.set_devices_per_node(n); }
  // While a placement whose weights are ready waits for its safe point, idle devices stall for
  // `weights` (the coordinator holds their rows back for the switch).
  void set_weights_wait(bool waiting);
  // Closes every worker's open stall interval (end of a measurement window).
  void flush_stalls();

 private:
  Topology topology_;
  EventLoop& loop_;
  std::int32_t process_ = 0;
  ClusterPeers* peers_ = nullptr;
  Worker::Hooks hooks_;
  std::vector<std::unique_ptr<Executor>> executors_;
  BatchRecycler recycler_;
  std::vector<std::unique_ptr<KvBlockManager>> kv_;  // [rank]
  std::unique_ptr<Transport> transport_;
  std::vector<std::unique_ptr<Worker>> workers_;

  // One weight copy in flight; its completion is the Completion of the target's executor.
  struct CopyJob {
    Cluster* cluster;
    WeightCopy copy;
    void finish(ExecutionTiming timing) { cluster->copy_arrived(*this, timing); }
  };
  void copy_arrived(CopyJob& job, ExecutionTiming timing);
  RuntimeObserver* observer_ = nullptr;
  ExpertResidency residency_;
  std::list<CopyJob> copies_;
  std::function<void()> ready_;
  std::optional<Placement> staged_;  // the placement waiting for the copies in flight
};

}  // namespace sy
