// One device of the expert-parallel runtime: receptor, μ-queues, token pool, scheduler,
// executor calls and dispatcher. Purely event-driven (no threads, no sleeps): it reacts to
// shipments arriving and executions finishing, through the EventLoop.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "engine/runtime/event_loop.h"
#include "engine/runtime/executor.h"
#include "engine/runtime/runtime_observer.h"
#include "engine/runtime/runtime_policy.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/token_packet.h"
#include "engine/runtime/token_pool.h"
#include "engine/runtime/topology.h"
#include "engine/runtime/transport.h"

namespace sy {

class Worker {
 public:
  // Calls into the coordinator when the sampler of this device's attention rank has run.
  struct Hooks {
    std::function<void(std::int64_t request, std::int32_t token)> on_sampled;
    // Grouped policies: this rank finished sampling micro-batch `group`.
    std::function<void(std::int32_t rank, std::int32_t group)> on_group_sampled;
  };

  Worker(std::int32_t device, const Topology& topology, EventLoop& loop, Executor& executor,
         Transport& transport, RuntimeObserver* observer, Hooks hooks);

  // Applies a policy. Only at a safe point: the worker must be quiescent (asserted).
  void set_policy(const RuntimePolicy& policy);
  // Receptor: queues arriving packets, merges expert outputs in the token pool.
  void receive(Shipment&& shipment);

  // Nothing queued, pooled, or executing.
  bool quiescent() const { return !running_ && queued_tokens_ == 0 && pool_.empty() && pending_groups_.empty(); }
  std::int32_t device() const { return device_; }
  std::int64_t queued_tokens() const { return queued_tokens_; }
  // Tokens waiting per μ-queue (LayerId), for state snapshots and queue-depth telemetry.
  std::vector<std::pair<LayerId, std::int64_t>> queue_depths() const;
  // Closes the open stall interval at `now` (end of a run).
  void flush_stall();

 private:
  struct Queue {
    std::deque<TokenPacket> packets;
    std::int64_t tokens = 0;
  };
  using GroupKey = std::tuple<LayerKind, std::int32_t, std::int32_t>;  // kind, block, group
  struct Job {
    LayerKind kind = LayerKind::Attention;
    std::int32_t block = 0;
    std::int32_t index = 0;
    std::int32_t group = -1;
    std::vector<TokenPacket> packets;
    std::vector<RoutedRows> routed;
    std::vector<std::int32_t> next_tokens;
    std::int64_t tokens = 0;
    std::int64_t start = 0;
  };

  std::int32_t column_of(const LayerId& id) const;
  Queue& queue_for(const LayerId& id);
  void enqueue(TokenPacket&& packet);
  void absorb_expert_output(TokenPacket&& packet);
  std::int32_t expected_shipments(LayerKind kind, std::int32_t block) const;
  void try_run();
  bool take_async_job(Job& job);
  bool take_grouped_job(Job& job);
  void drain(Queue& q, std::int32_t group, std::vector<TokenPacket>& out);
  void execute(std::shared_ptr<Job> job);
  void finish(const std::shared_ptr<Job>& job);
  void dispatch_attention(Job& job);
  void dispatch_experts(Job& job);
  void dispatch_sampler(Job& job);
  std::int32_t choose_replica(std::int32_t block, std::int32_t expert, std::int64_t request, std::int32_t row) const;
  void update_stall();
  StallReason current_stall_reason() const;

  const std::int32_t device_;
  const Topology& topo_;
  EventLoop& loop_;
  Executor& executor_;
  Transport& transport_;
  RuntimeObserver* observer_;
  Hooks hooks_;

  RuntimePolicy policy_;
  std::unique_ptr<Scheduler> scheduler_;
  std::int32_t rank_ = -1;                    // attention rank hosted here, or -1
  std::int32_t columns_ = 0;
  std::vector<std::int32_t> expert_column_;   // expert id -> grid column, or -1
  std::vector<std::int32_t> column_expert_;   // grid column -> expert id (-1: the attention column)
  std::vector<Queue> queues_;                 // [(block) * columns + column], blocks = L + 1
  std::int64_t queued_tokens_ = 0;
  QueueGrid grid_;
  TokenPool pool_;
  std::map<GroupKey, std::int32_t> arrived_;   // grouped: shipments received per key
  std::deque<GroupKey> pending_groups_;        // grouped: complete keys, oldest first
  bool running_ = false;
  bool stalled_ = false;
  StallReason stall_reason_ = StallReason::QueueEmpty;
  std::int64_t stall_start_ = 0;
};

}  // namespace sy
