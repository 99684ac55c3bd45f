// The coordinator: admission with continuous batching, DP-rank assignment by most free KV
// pages, capacity limits (queue or reject, never crash), iteration control for grouped
// policies, chunked prefill under a per-pass token budget, and policy switches applied at a
// safe point with no token lost or duplicated.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <unordered_map>
#include <string>
#include <vector>

#include "engine/runtime/cluster.h"
#include "engine/serving/adaptive_chooser.h"
#include "engine/serving/adaptive_tuner.h"
#include "engine/runtime/placement.h"
#include "engine/serving/request_observer.h"
#include "engine/runtime/runtime_policy.h"
#include "engine/serving/workload.h"
#include "kernels/cpu/sampling.h"

namespace sy {

struct CoordinatorOptions {
  std::int32_t max_batch_per_rank = 64;       // concurrent requests per attention rank
  std::optional<std::int32_t> eos_token_id;   // a request finishes after emitting it
  kernels::SamplingParams sampling;           // greedy by default
  kernels::Penalties penalties;               // SamplingSpec's, for requests without their own
  std::uint64_t seed = 0;                     // per-request sampler seed = seed ^ request id
  // Decode-only serving, as the papers measure (AMoE §5 "populating KV cache with dummy
  // data"): a request enters with its prompt already cached and its first step is a single
  // decode row. Only meaningful on the sim backend, where no tensor is computed.
  bool skip_prefill = false;
  // Keep each finished request's prompt and output (generate and tests read them); a service
  // that runs until interrupted drops them.
  bool keep_finished = true;
  // Back-pressure: a request arriving while this many requests, or this many prompt tokens,
  // wait for admission is rejected at once with a reason the client sees, so memory stays
  // flat whatever the arrival rate.
  std::int64_t max_waiting_requests = 4096;
  std::int64_t max_waiting_tokens = std::int64_t{1} << 22;
  // Automatic prefix caching (engine/kv/prefix_cache.h): a request whose prompt begins with
  // pages another prompt wrote on the same attention rank shares them and computes only the
  // rest; admission prefers the rank holding the longest such prefix.
  bool prefix_caching = false;
  // Chunked prefill (vLLM's max_num_batched_tokens): the rows one pass of an attention rank
  // feeds block 0 (a micro-batch's iteration under sync, pingpong and findep; an injection under
  // async). Decode rows go first, then the prompts still being fed, oldest admission first, the
  // last cut to what is left; the rest of a prompt follows in the rank's next pass. Whatever the
  // decodes leave, the oldest prompt still advances by one row, so no prompt starves. 0: off,
  // every prompt in one pass.
  std::int32_t max_num_batched_tokens = 0;
};

enum class RequestState : std::uint8_t { Pending, Waiting, Running, Finished, Rejected };

struct RequestRecord {
  RequestSpec spec;
  RequestState state = RequestState::Pending;
  std::int32_t rank = -1;
  std::vector<std::int32_t> output;
  std::string reject_reason;
  std::int32_t slot = -1;  // grouped policies: the micro-batch it rides in
  bool cancel = false;     // running, cancelled: finishes when its rows in flight come back
  FinishReason finish_reason = FinishReason::None;
  std::int64_t last_token_ns = -1;  // the adaptive policy measures inter-token gaps
  std::int32_t cached_positions = 0;  // prompt positions whose KV a prefix cache supplied
  // Prompt positions fed to block 0 so far (written, or in flight): the next chunk starts here.
  std::int32_t prefilled = 0;
  std::int64_t admitted_seq = 0;  // admission order: chunked prefill serves prompts first come, first served
};

class Coordinator {
 public:
  // observer (may be null) sees every request's lifecycle.
  Coordinator(EventLoop& loop, const CoordinatorOptions& options, RequestObserver* observer);
  // Wires the cluster (its worker hooks must call on_sampled / on_group_sampled) and starts
  // serving under `policy`.
  void attach(Cluster& cluster, const RuntimePolicy& policy);
  Worker::Hooks hooks();

  // Schedules the request's arrival at spec.arrival_ns.
  void submit(RequestSpec spec);
  // Called once a requested change has been applied (at the safe point), with the time.
  using ChangeDone = std::function<void(std::int64_t applied_at_ns)>;
  // Switches policy at the next safe point. Errors name the bad parameter; serving continues.
  Status request_policy(const RuntimePolicy& policy, ChangeDone done = {});
  // Moves, replicates or removes expert replicas ([block][expert] -> devices) in two steps:
  // first the weights the placement puts on devices that lack them are copied there while
  // serving goes on under the current placement (staged); once every copy has arrived the change
  // waits for the next safe point like any other, and the sources' surplus copies are freed
  // there. Refused at once, changing nothing, when the shape is wrong (the message names the
  // block, expert or device) or a device has no room for the weights it would receive.
  // `copies` (may be null) gets the copies this request started. A request made while another
  // is staged is staged behind the same copies, so placements apply in the order asked.
  Status request_placement(Placement placement, ChangeDone done = {}, std::vector<WeightCopy>* copies = nullptr);
  // A placement is staged: its weights are still being copied (serving goes on meanwhile).
  bool staging() const { return staged_placement_.has_value(); }
  // Cancels the request with this RequestSpec::id (a client that went away): a waiting one
  // leaves the queue at once; a running one finishes, its KV pages freed, when the rows it has
  // in flight come back (the one safe place under every policy: no other request's token is
  // touched), its last token dropped. Observers see it finish with FinishReason::Cancelled.
  // Returns false when no such request is open (finished, rejected, or not arrived yet: post
  // the cancel after the submit's arrival time).
  bool cancel(std::int64_t request_id);
  // The deployment cannot go on (a process of it died): every open request is rejected with
  // `why` (RejectReason::Failed), later arrivals too, and nothing is admitted or sampled again.
  void fail(const std::string& why);
  bool failed() const { return failure_.has_value(); }
  // Why (set by fail()): e.g. which rank stopped answering.
  const std::optional<std::string>& failure() const { return failure_; }
  // Stops or resumes admitting new requests (running ones continue).
  void set_admission_paused(bool paused);
  bool admission_paused() const { return paused_; }
  // Concurrent requests per attention rank from now on (a plan's b_a·m); running requests above a
  // lowered limit finish, no new one is admitted until the rank is below it.
  void set_max_batch_per_rank(std::int32_t n) { options_.max_batch_per_rank = n; }
  std::int32_t max_batch_per_rank() const { return options_.max_batch_per_rank; }
  // Chunked prefill's budget (CoordinatorOptions::max_num_batched_tokens) from the next pass on;
  // a prompt between two chunks goes on from where it is, cut to the new budget (0: whole).
  void set_max_num_batched_tokens(std::int32_t n) { options_.max_num_batched_tokens = n; }

  const RuntimePolicy& policy() const { return policy_; }
  // The policy that will hold once the pending switch (if any) is applied.
  const RuntimePolicy& target_policy() const { return pending_policy_ ? *pending_policy_ : policy_; }
  bool switching() const { return pending_policy_.has_value() || pending_placement_.has_value(); }
  // The placement that will hold once the pending change (if any) is applied.
  const Placement& target_placement() const {
    return staged_placement_ ? *staged_placement_
                             : pending_placement_ ? *pending_placement_ : cluster_->topology().placement;
  }
  // Every submitted request has arrived and finished or been rejected.
  bool done() const { return arrived_ == submitted_ && open_ == 0; }
  // Every request submitted, in submission order; with keep_finished = false only those the
  // admission queue took, in arrival order, minus the finished ones already dropped
  // (requests()[0] is request first_request()).
  const std::deque<RequestRecord>& requests() const { return requests_; }
  std::int64_t first_request() const { return first_request_; }
  std::int64_t policy_switches() const { return switches_; }
  std::int64_t placement_changes() const { return placement_changes_; }  // applied since the start
  std::int64_t waiting_requests() const { return static_cast<std::int64_t>(waiting_.size()); }
  // KV pages reserved by running requests and in all, over every attention rank.
  std::int64_t kv_pages_used() const;
  std::int64_t kv_pages_total() const;
  // Prefix caching since the start: prompt tokens admitted, and those whose KV came from the
  // cache (vLLM's prefix_cache_queries and prefix_cache_hits).
  std::int64_t prefix_cache_queries() const { return prefix_queries_; }
  const CoordinatorOptions& options() const { return options_; }
  std::int64_t prefix_cache_hits() const { return prefix_hits_; }
  std::int64_t open_requests() const { return open_; }  // arrived, neither finished nor rejected
  // Mean positions (prompt and output so far) of the running requests; 0 when none runs.
  double mean_context() const;
  std::int32_t running(std::int32_t rank) const { return running_per_rank_[rank]; }
  std::size_t waiting() const { return waiting_.size(); }
  std::int64_t waiting_tokens() const { return waiting_tokens_; }
  // Requests rejected because the admission queue was full.
  std::int64_t rejected_queue_full() const { return rejected_queue_full_; }

  // The adaptive policy's windows: every kAdaptiveWindowNs of loop time the tuner (or, with
  // thresholds set, the band chooser) sees the window's load and what it served, and may switch
  // the concrete policy (through request_policy, at a safe point). A window restarts when a
  // switch is applied, so no window holds a drain or two policies. A probe's windows are the
  // tuner's probe_window_ns, run on to kAdaptiveWindowNs until they hold enough tokens.
  static constexpr std::int64_t kAdaptiveWindowNs = 100'000'000;
  struct AdaptiveSwitch {
    std::int64_t t_ns = 0;  // decided at
    RuntimePolicy from, to;
    std::string reason;
  };
  // Called when the adaptive policy decides a switch (telemetry: a control event).
  void on_adaptive_switch(std::function<void(const AdaptiveSwitch&)> fn) { on_adaptive_switch_ = std::move(fn); }
  // Every switch the adaptive policy decided, oldest first.
  const std::vector<AdaptiveSwitch>& adaptive_switches() const { return adaptive_switches_; }
  // The smoothed offered load (tok/s per attention rank); 0 unless adaptive.
  double adaptive_load() const { return tuner_ ? tuner_->load() : chooser_ ? chooser_->load() : 0; }

 private:
  struct Slot {
    std::vector<std::int64_t> members;  // request indices
    bool running = false;
    std::int32_t group = -1;
    std::int32_t ranks_done = 0;
  };

  void on_arrival(std::int64_t idx);
  // keep_finished off: the request gets a record only when the queue takes it.
  void on_unrecorded_arrival(RequestSpec spec);
  bool queue_full(std::int64_t prompt_tokens) const;
  std::string queue_full_message(const std::string& external_id) const;
  void on_sampled(std::int64_t idx, std::int32_t token, const kernels::TokenLogprobs* logprobs);
  void on_group_sampled(std::int32_t rank, std::int32_t group);
  void on_prompt_logprobs(const PromptLogprobs& logprobs);
  bool admit_one(std::int32_t slot);
  void admit_async();
  void start_slot(std::int32_t slot);
  void start_idle_slots();
  // Appends the rows request `idx` feeds block 0 next: the rest of its prompt, at most
  // `prompt_rows` of it when ≥ 0 (or, decode-only, its last prompt token), else its last output
  // token. Returns how many.
  std::int32_t append_next_rows(TokenBatch& out, std::int64_t idx, std::int32_t prompt_rows = -1);
  // Whether the request's next rows are a chunk of its prompt.
  bool prefilling(const RequestRecord& r) const;
  // One rank's pass from `requests` (all of that rank, none with rows in flight) under
  // max_num_batched_tokens: the decode rows, then the prompts oldest admission first, the last
  // cut to the budget; those left out go to `left_out`. Off, everything in the order given.
  void fill_pass(TokenBatch& out, const std::vector<std::int64_t>& requests, std::vector<std::int64_t>& left_out);
  // Async: queues the request's next rows for its rank; one injection per rank and instant.
  void inject_soon(std::int64_t idx);
  void finish(std::int64_t idx, FinishReason reason);
  void drop_done_records();
  void check_safe_point();
  // Every process applied `policy` (the change asked for as of change number `seq`): resumes.
  void release_safe_point(const RuntimePolicy& policy, std::uint64_t seq, const std::vector<ChangeDone>& done);
  void reset_slots();
  // Async: whether a request admitted on `rank` waits for the rank's next sampling, so that it
  // enters block 0 with the wave of requests that rank is serving (AMoE: waves kept whole).
  bool hold_for_wave(std::int32_t rank) const;
  // The requests held for the wave of `rank` enter block 0 with it.
  void release_wave(std::int32_t rank);
  // Adaptive: starts the window timer (when the policy is adaptive and no timer runs), or with
  // `restart` begins a new window now (a switch was applied).
  void start_adaptive(bool restart = false);
  void reset_adaptive_window();
  std::int64_t adaptive_window_ns() const;  // a probe's windows may be shorter
  void adaptive_window();
  // Records an adaptive decision (the control event's source) and returns the policy it names.
  RuntimePolicy announce_adaptive_switch(std::int64_t now, PolicyKind to, const std::string& reason);

  EventLoop& loop_;
  CoordinatorOptions options_;
  void notify(std::int64_t idx, RequestPhase phase, RejectReason reason = RejectReason::None,
              const kernels::TokenLogprobs* logprobs = nullptr);
  // The request's stop tokens say it is done after `token`.
  bool stops_at(const RequestRecord& r, std::int32_t token) const;
  void notify(const RequestRecord& r, RequestPhase phase, RejectReason reason = RejectReason::None,
              const kernels::TokenLogprobs* logprobs = nullptr);
  void reject(std::int64_t idx, RejectReason reason, std::string why);
  // Leaves the waiting queue (admitted or rejected).
  void pop_waiting();

  RequestObserver* observer_;
  Cluster* cluster_ = nullptr;
  RuntimePolicy policy_;
  std::optional<RuntimePolicy> pending_policy_;
  std::optional<Placement> pending_placement_;
  std::vector<ChangeDone> pending_done_;
  // Waiting for its weights to be copied (request_placement), then pending.
  std::optional<Placement> staged_placement_;
  std::vector<ChangeDone> staged_done_;
  void weights_ready();
  std::uint64_t change_seq_ = 0;  // bumped by every requested change
  bool releasing_ = false;        // a change is being applied on every process
  std::optional<std::string> failure_;  // set by fail()
  bool paused_ = false;
  RequestRecord& record(std::int64_t idx) { return requests_[static_cast<std::size_t>(idx - first_request_)]; }
  const RequestRecord& record(std::int64_t idx) const {
    return requests_[static_cast<std::size_t>(idx - first_request_)];
  }

  std::deque<RequestRecord> requests_;
  std::int64_t first_request_ = 0;  // index of requests_.front()
  std::deque<std::int64_t> waiting_;
  std::unordered_map<std::int64_t, std::int64_t> open_ids_;  // RequestSpec::id -> index, while open
  std::int64_t waiting_tokens_ = 0;  // prompt tokens of the waiting requests
  std::int64_t rejected_queue_full_ = 0;
  std::vector<std::int32_t> running_per_rank_;
  // Async: per rank, the requests whose next rows enter block 0 with the posted injection.
  std::vector<std::vector<std::int64_t>> pending_injection_;
  std::int64_t admissions_ = 0;  // RequestRecord::admitted_seq
  bool injection_posted_ = false;
  std::vector<std::int64_t> parked_;  // async, while switching: sampled and held at the safe point
  std::vector<Slot> slots_;
  // Bumped whenever slots_ is rebuilt (policy switch): continuations posted for a slot of the
  // previous policy must not touch the new slots, whose count may be smaller.
  std::uint64_t slots_epoch_ = 0;
  std::unordered_map<std::int32_t, std::int32_t> group_slot_;  // running group id -> slot
  std::int32_t next_group_ = 0;
  std::int64_t arrived_ = 0;
  std::int64_t submitted_ = 0;
  std::int32_t last_rank_ = -1;  // the rank the last admission chose (round-robin tie-break)
  std::int64_t prefix_queries_ = 0, prefix_hits_ = 0;
  std::int64_t open_ = 0;  // arrived, neither finished nor rejected
  std::int64_t switches_ = 0;
  std::int64_t placement_changes_ = 0;
  // Async: per rank, admitted and waiting for its wave, or a prompt the last pass's budget
  // left out (chunked prefill): both enter block 0 with the rank's next pass.
  std::vector<std::vector<std::int64_t>> held_;
  std::vector<std::int64_t> held_count_;          // held_[rank].size(), kept while held_ is swapped out
  // Adaptive policy.
  // Thresholds set: the band chooser; otherwise the online tuner (adaptive_tuner.h).
  std::optional<AdaptiveChooser> chooser_;
  std::optional<AdaptiveTuner> tuner_;
  bool adaptive_timer_ = false;
  std::uint64_t adaptive_window_seq_ = 0;  // a restarted window's timer outdates the earlier one
  double window_offered_tokens_ = 0;  // max_new_tokens of the requests that arrived in the window
  std::int64_t window_start_ns_ = 0;
  std::int64_t window_arrivals_ = 0;
  std::int64_t window_queue_delay_ns_ = 0;  // summed over the requests that left the queue in the window
  std::int64_t window_left_queue_ = 0;
  std::int64_t window_tokens_ = 0;
  std::int64_t window_gap_sum_ns_ = 0;
  std::int64_t window_gaps_ = 0;
  std::int64_t policy_since_ns_ = 0;
  std::int64_t adaptive_asked_ns_ = -1;  // the tuner asked for the pending switch then
  std::int64_t last_drain_ns_ = 0;       // its drain, for the first window after it  // the policy in force was applied then: older gaps span a switch
  std::function<void(const AdaptiveSwitch&)> on_adaptive_switch_;
  std::vector<AdaptiveSwitch> adaptive_switches_;
};

}  // namespace sy
