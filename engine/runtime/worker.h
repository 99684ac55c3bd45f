// One device of the expert-parallel runtime: receptor, μ-queues, token pool, scheduler,
// executor calls and dispatcher. Purely event-driven (no threads, no sleeps): it reacts to
// shipments arriving and executions completing, through the EventLoop, whether the device's
// work runs on virtual time or on a thread or stream of its own.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/runtime/activation_ops.h"
#include "engine/runtime/batch_recycler.h"
#include "engine/kv/kv_block_manager.h"
#include "engine/runtime/event_loop.h"
#include "engine/runtime/executor.h"
#include "engine/runtime/mu_queue_gate.h"
#include "engine/runtime/runtime_observer.h"
#include "engine/runtime/runtime_policy.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/token_batch.h"
#include "engine/runtime/token_pool.h"
#include "engine/runtime/topology.h"
#include "engine/runtime/transport.h"

namespace sy {

class Worker {
 public:
  // Calls into the coordinator when the sampler of this device's attention rank has run.
  static constexpr std::int32_t kNoToken = -1;
  struct Hooks {
    // logprobs: null unless the request asked for them (SamplingSpec::logprobs). token is
    // kNoToken when the execution held a chunk of the request's prompt that is not its last
    // (chunked prefill, KvBlockManager::mid_prompt): nothing was drawn or recorded for it, and
    // the coordinator feeds it its next chunk.
    std::function<void(std::int64_t request, std::int32_t token, const kernels::TokenLogprobs* logprobs)> on_sampled;
    // The log-probabilities of prompt tokens that a sample execution scored for a request that
    // asked (SamplingSpec::prompt_logprobs), one call per request and execution, before that
    // execution's on_sampled of the request. May be unset: nobody asks.
    std::function<void(const PromptLogprobs& logprobs)> on_prompt_logprobs;
    // Grouped policies: this rank finished sampling micro-batch `group`.
    std::function<void(std::int32_t rank, std::int32_t group)> on_group_sampled;
  };

  // One μ-queue's depth at a moment: for state snapshots and queue-depth telemetry.
  struct QueueDepth {
    LayerId layer;
    std::int64_t tokens = 0;
    std::int64_t oldest_ns = 0;  // when its oldest waiting row was queued
  };

  // kv: the KV block manager of the attention rank hosted here (null on expert-only devices).
  Worker(std::int32_t device, const Topology& topology, EventLoop& loop, Executor& executor,
         Transport& transport, BatchRecycler& recycler, RuntimeObserver* observer, Hooks hooks,
         KvBlockManager* kv);

  // Where sampled tokens go: the coordinator's hooks, or (an attention device in another
  // process than the coordinator) hooks that send them there. Before the first execution.
  void set_hooks(Hooks hooks) { hooks_ = std::move(hooks); }
  // Applies a policy. Only at a safe point: the worker must be quiescent (asserted).
  void set_policy(const RuntimePolicy& policy);
  // Re-reads the topology's placement (which experts this device hosts). Only at a safe point.
  void reload_placement();
  // While on, an idle device stalls for `weights`: its rows are held back for a placement
  // switch whose weights have been copied (Cluster::set_weights_wait).
  void set_weights_wait(bool waiting) {
    weights_wait_ = waiting;
    update_stall();
  }
  // Phase 1: a shipment is on its way here (a stall may now be waiting on a transfer).
  void announce(const ShipmentHeader& header);
  // Receptor (phase 2): queues arriving rows, holds expert outputs in the token pool.
  void receive(Shipment&& shipment);
  // Whether a header or shipment from another process is one this device can take now: its
  // layers are this device's (an expert it hosts, its own attention rank), its requests are
  // admitted here, its expert outputs are awaited by the token pool, its rows carry activations
  // of the model's width (all but block 0's attention rows). announce() and receive()
  // trust what they get (our own process's shipments); a peer's message that fails this is
  // dropped with the reason instead of ending the process. On the loop, as receive().
  Status check_remote(const ShipmentHeader& header) const;
  Status check_remote(const Shipment& shipment) const;

  // Nothing queued, pooled, or executing.
  bool quiescent() const {
    return !running_ && queued_tokens_ == 0 && pool_.empty() && merges_.empty() && pending_groups_.empty() &&
           shared_jobs_.empty();
  }
  std::int32_t device() const { return device_; }
  std::int64_t queued_tokens() const { return queued_tokens_; }
  // Every non-empty μ-queue (with the arrivals held while it executes taken in first).
  std::vector<QueueDepth> queue_depths();
  // Closes the open stall interval at `now` (end of a run).
  void flush_stall();

 private:
  struct Queue {
    std::vector<TokenBatch> batches;  // async: one (group -1); grouped: one per micro-batch
    std::int64_t tokens = 0;
    std::size_t block = 0;  // its block in the grid (the queue's index / columns_)
  };
  using GroupKey = std::tuple<LayerKind, std::int32_t, std::int32_t>;  // kind, block, group
  struct Job {
    LayerKind kind = LayerKind::Attention;
    std::int32_t block = 0;
    std::int32_t index = 0;
    std::int32_t group = -1;
    bool shared = false;                 // findep: the shared expert of an attention block's rows
    TokenBatch batch;                    // attention, shared expert and sampler
    std::vector<TokenBatch> per_expert;  // expert executions, ascending expert id
    std::vector<TokenBatch*> expert_batches;  // what the executor is handed: per_expert's addresses
    RoutedRows routed;
    std::vector<SequenceContext> sequences;       // attention and sampler: one per request
    std::vector<TokenPool::Completed> merges;     // merge executions
    std::vector<std::int32_t> next_tokens;
    std::vector<kernels::TokenLogprobs> next_logprobs;  // empty unless a request asked
    std::vector<PromptLogprobs> prompt_logprobs;        // empty unless a request asked
    std::int64_t tokens = 0;
    std::int64_t start = 0;
  };

  std::size_t queue_index(const LayerId& id) const;
  // The batch of queue `qi` that rows of `group` append to, created (and stamped) when absent.
  TokenBatch& queue_tail(std::size_t qi, const LayerId& layer, std::int32_t group);
  TokenBatch& find_queue_tail(std::size_t qi, const LayerId& layer, std::int32_t group);  // its slow path
  void account(std::size_t qi, std::int64_t rows);
  // Queues the rows of `batch`, a batch of a delivered shipment: it is left empty or holding
  // rows already copied, and goes back to the recycler with its shipment's list.
  void enqueue(TokenBatch& batch);
  void absorb_expert_outputs(const TokenBatch& outputs);
  // A request the token pool let go: merged by an execution, or (sim) queued at once.
  void take_completed(TokenPool::Completed& c);
  // Grouped: one more arrival for `key`; the key is pending once all it expects are in.
  void arrive(const GroupKey& key);
  // findep: runs the oldest waiting shared-expert execution, if any.
  bool take_shared_job();
  std::int32_t expected_shipments(LayerKind kind, std::int32_t block) const;
  // The micro-batch an expert job's group belongs to: findep ships each micro-batch's expert
  // work as r2 chunk groups (group · r2 + chunk); -1 (async) stays -1.
  std::int32_t micro_batch_of(std::int32_t group) const { return group < 0 ? group : group / policy_.chunks(); }
  void try_run();
  bool take_async_job();
  bool take_grouped_job();
  void drain(std::size_t queue, std::int32_t group, TokenBatch& out);
  void execute();
  // Runs the token pool's pending merges as one execution.
  void execute_merges();
  void finish(ExecutionTiming timing);
  void finish_merges(ExecutionTiming timing);
  // After an execution: starts the next one, or opens a stall from `idle_since`.
  void run_next_or_stall(std::int64_t idle_since);
  // Queues a merged request's rows for the layer after its expert block.
  void enqueue_merged(TokenPool::Completed& c);
  // The block tables (and sampling) of the job's requests, from the rank's KV manager.
  void collect_sequences();
  void close_stall();
  // Runs the arrivals the loop held back while this device executes (close_stall), if any.
  void catch_up() {
    if (lane_ && lane_->waiting > 0) loop_.catch_up_lane(device_);
  }
  void dispatch_attention();
  void dispatch_experts();
  void dispatch_sampler();
  void dispatch_shared_expert();
  std::int32_t choose_replica(std::int32_t block, std::int32_t expert, std::int64_t request, std::int32_t row) const;
  // The index of the outgoing batch for (device, layer), created on first use in this dispatch.
  std::size_t outgoing_index(std::int32_t device, const LayerId& layer, std::int32_t group);
  std::size_t add_outgoing(std::int32_t device, const LayerId& layer, std::int32_t group);  // its slow path
  // The columns (TokenBatch) of an outgoing batch bound for `layer`: a dispatch sends expert
  // rows to an expert, and expert outputs to anything else.
  static std::uint8_t outgoing_columns(const LayerId& layer) {
    return layer.kind == LayerKind::Expert ? kExpertColumns : kOutputColumns;
  }
  // The rows whose activations outgoing batch `batch` of `device` is to receive.
  std::vector<SourceRow>& gather_list(std::int32_t device, std::size_t batch);
  // One backend gather per outgoing batch that has rows listed; empties the lists.
  void gather_outgoing(ActivationOps& ops);
  void send_outgoing(LayerKind kind, std::int32_t block, std::int32_t group, const std::vector<std::int32_t>& always);
  void update_stall();
  StallReason current_stall_reason() const;
  // Async with the gate on, the queues the scheduler may pick from (in gated_grid_): those
  // holding the cost model's minimum batch or waiting past the starvation bound; failing any,
  // those whose gate is open (past the maximum wait, or nothing more on its way to them). A
  // small, young queue with rows on their way to it waits; a wake-up is armed for the first
  // such queue to open.
  const QueueGrid& open_queues();
  void arm_gate(std::int64_t at);
  // Rows known to be on their way to queue (b, c): for an attention rank's queue the requests
  // in its token pool whose next layer it is; for an expert queue the rows of block b in
  // shipments announced to this device (phase 1) and not yet delivered.
  std::int64_t expected_rows(std::int32_t block, std::int32_t column) const;
  // A queue below its minimum batch waits behind full ones at most this many maximum waits.
  static constexpr std::int64_t kGateStarveWaits = 8;

  const std::int32_t device_;
  const Topology& topo_;
  EventLoop& loop_;
  Executor& executor_;
  Transport& transport_;
  BatchRecycler& recycler_;
  RuntimeObserver* observer_;
  Hooks hooks_;

  RuntimePolicy policy_;
  std::unique_ptr<Scheduler> scheduler_;
  // Async with the gate: per layer kind (attention, expert, sampler), when the backend has one.
  std::optional<MuQueueGate> gates_[3];
  bool gated_ = false;
  QueueGrid gated_grid_;
  std::vector<std::pair<std::int32_t, int>> tiers_;  // open_queues scratch: (cell, tier)
  std::vector<std::int64_t> pooled_rows_;      // [block]: rows in the token pool that go to this block next
  std::vector<std::int64_t> inbound_expert_rows_;  // [block]: expert rows announced here, not yet delivered
  std::int64_t gate_armed_ns_ = -1;           // the wake-up on its way (-1: none)
  std::int32_t rank_ = -1;                    // attention rank hosted here, or -1
  std::int32_t columns_ = 0;
  std::vector<std::int32_t> expert_column_;   // expert id -> grid column, or -1
  std::vector<std::int32_t> column_expert_;   // grid column -> expert id (-1: the attention column)
  std::vector<Queue> queues_;                 // [(block) * columns + column], blocks = L + 1
  std::int64_t queued_tokens_ = 0;
  QueueGrid grid_;                            // tokens per queue, kept in step with queues_
  TokenPool pool_;
  std::vector<TokenPool::Completed> merges_;     // complete in the pool, waiting for their merge
  KvBlockManager* kv_;  // the rank's: block tables and sampling for executions, sampled tokens back
  EventLoop::Lane* lane_ = nullptr;  // this device's lane on the loop, where it has lanes
  std::map<GroupKey, std::int32_t> arrived_;   // grouped: shipments received per key
  std::deque<GroupKey> pending_groups_;        // grouped: complete keys, oldest first
  // findep: shared-expert executions waiting for the device (ffn input rows of one attention
  // micro-batch, layer = its attention block), oldest first.
  std::deque<TokenBatch> shared_jobs_;
  Job job_;
  bool running_ = false;
  bool stalled_ = false;
  bool weights_wait_ = false;
  StallReason stall_reason_ = StallReason::QueueEmpty;
  std::int64_t stall_start_ = 0;
  // Dispatch scratch: per destination device, the batches being filled (one per expert, or
  // one for the attention rank), and the devices touched so far.
  // outgoing_[d] holds outgoing_used_[d] batches being filled, then empty ones that came with a
  // recycled list (filled next, in place).
  std::vector<std::vector<TokenBatch>> outgoing_;
  std::vector<std::size_t> outgoing_used_;
  std::vector<std::int32_t> touched_;
  Shipment shipment_;  // send_outgoing's, its list moved out by every send
  std::vector<std::vector<std::vector<SourceRow>>> gather_rows_;  // parallel to outgoing_
  // An outgoing batch being filled, by address, its device and its index in outgoing_[device],
  // valid while `epoch` is out_epoch_. A new epoch (each chunk of a dispatch, and whenever a
  // new batch moves a list of outgoing_) drops them all at once: resetting the entries set cost
  // more than the cache saved where most experts take one row per chunk.
  struct OutgoingRef {
    TokenBatch* batch = nullptr;
    std::uint64_t epoch = 0;
    std::int32_t device = 0;
    std::int32_t index = 0;
  };
  std::vector<OutgoingRef> expert_out_;  // dispatch_attention: per expert with one replica
  std::vector<OutgoingRef> rank_out_;    // dispatch_experts: per attention rank
  std::uint64_t out_epoch_ = 1;
};

}  // namespace sy
