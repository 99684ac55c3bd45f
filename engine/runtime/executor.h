// What a worker asks its backend to compute. Every execution is asynchronous: the call queues
// the work on the device and returns; the Completion runs on the worker's event loop once the
// device has finished (sim: at the modelled time; cpu: when its thread is done; cuda: when a
// recorded event fires). Until then the worker leaves the execution's arguments alone.
#pragma once

#include <cassert>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "engine/runtime/activations.h"
#include "engine/runtime/completion.h"
#include "engine/runtime/mu_queue_gate.h"
#include "engine/runtime/prompt_logprobs.h"
#include "engine/runtime/runtime_policy.h"
#include "engine/runtime/sequence.h"
#include "engine/runtime/token_batch.h"
#include "engine/runtime/token_pool.h"
#include "kernels/cpu/logprobs.h"

namespace sy {

// Routing of an attention batch's rows in a sparse block.
struct RoutedRows {
  std::vector<std::int32_t> expert_ids;  // rows × K
  std::vector<float> expert_weights;     // rows × K
  Activations ffn_in;                    // rows: what the experts consume (null without activations)
  Activations shared_out;                // rows: shared expert output (qwen2_moe), else null
  // In, set by the worker before attention(): the shared expert runs as an execution of its
  // own (findep), so attention leaves shared_out null and charges no time for it.
  bool shared_apart = false;
  // Out: attention left this block's shared expert to a shared_expert() call (shared_apart was
  // set and the block has one). Set by attention() for every sparse block, false otherwise.
  bool shared_pending = false;
};

class Executor {
 public:
  virtual ~Executor() = default;

  // Attention half of `block` over one rank's rows, in place on their hidden rows (block 0
  // embeds the rows' tokens first, into activations the backend allocates). `sequences` has one entry per request of the batch, in
  // batch order: its KV block table. For a sparse block fills `routed` for every row; for a
  // dense block also applies the MLP, so the hidden rows are the next block's input.
  virtual void attention(std::int32_t block, TokenBatch& batch, std::span<const SequenceContext> sequences,
                         RoutedRows& routed, Completion done) = 0;
  // Expert FFNs of `block`, one batch per expert (batch->layer.index): each row's hidden
  // (its ffn input) is replaced by the expert's output scaled by the row's weight, in
  // activations the backend allocates or reuses. Several
  // experts in one call form one grouped execution.
  virtual void experts(std::int32_t block, const std::vector<TokenBatch*>& per_expert, Completion done) = 0;
  // The shared expert of sparse `block` (qwen2_moe: sigmoid(gate(x)) · mlp(x)) as an execution of
  // its own on the attention device (FinDEP §3.2), after an attention() that left it pending:
  // each row's hidden (its ffn input, RoutedRows::ffn_in of that attention) is replaced by the
  // shared expert's output, in activations the backend allocates or reuses. Without
  // activations (sim) only batch.rows() matters. The same math as the shared expert inside
  // attention, so outputs do not depend on where it ran.
  virtual void shared_expert(std::int32_t block, TokenBatch& batch, Completion done) = 0;
  // Final norm, lm_head and sampling of the last row of each request in `batch` (sampling as
  // its sequence says); next gets one token per request, in batch order. When a sequence asks
  // for log-probabilities (SamplingSpec::logprobs ≥ 0) logprobs gets one entry per request, in
  // batch order (token -1 for those that did not ask); otherwise it is left empty. When one
  // asks for prompt log-probabilities (SamplingSpec::prompt_logprobs ≥ 0, its prompt in its
  // SequenceContext), every row of it at a position p followed by a prompt token (p + 1 <
  // prompt length) has its logits computed too, and prompt_logprobs gets one entry for it: the
  // prompt tokens at p + 1 for those rows, in order (a batch holding a whole prompt scores
  // positions 1 to length − 1; one holding a chunk [a, b) of it, positions a + 1 to b).
  // Otherwise prompt_logprobs is left empty. A backend without logits (sim) leaves logprobs
  // and prompt_logprobs empty.
  virtual void sample(TokenBatch& batch, std::span<const SequenceContext> sequences, std::vector<std::int32_t>& next,
                      std::vector<kernels::TokenLogprobs>& logprobs, std::vector<PromptLogprobs>& prompt_logprobs,
                      Completion done) = 0;
  // The token pool's merge, as one execution for every request whose expert outputs are all
  // back: hidden += Σ_k slot outputs + shared, summed in slot order so that arrival order does
  // not matter. Only called for requests that carry activations.
  virtual void merge(std::vector<TokenPool::Completed>& merges, Completion done) = 0;

  // Expert weights. Each device holds its own copy of every expert it hosts and runs only
  // those; a placement change copies weights between devices before it switches. The runtime
  // calls these on the loop thread; the copy itself may run anywhere (cpu: the device's
  // thread; cuda: a copy stream, device-to-device within a node or NCCL between GPUs; sim:
  // the link's time), concurrently with the device's executions.
  //
  // Whether this device holds its own copy of the experts it hosts (cpu, sim). A backend whose
  // devices read one shared copy of the model (one upload for every device) says no: its
  // placement changes copy nothing and switch at the next safe point; the calls below are then
  // never made, except the accounting ones. Saying yes takes implementing fetch_expert.
  virtual bool owns_expert_weights() const { return false; }
  // Bytes of one routed expert's weights on this device (every expert has the same shape).
  virtual std::int64_t expert_bytes() const { return 0; }
  // Bytes of KV storage this device keeps (an attention rank's cache), for memory accounting.
  virtual std::int64_t kv_storage_bytes() const { return 0; }
  // Makes (block, expert) resident from the backend's host copy at once (the checkpoint the
  // deployment loaded): the start-up placement, and devices of another process, which cannot
  // be copied from here.
  virtual void load_expert(std::int32_t /*block*/, std::int32_t /*expert*/) {}
  // Copies (block, expert) from `source` (a device of the same backend that holds it; null:
  // from host memory) to this device; `done` runs on the loop once the copy is resident here,
  // with the interval it took. The source's copy stays valid until the placement that drops it
  // is applied, which waits for every copy. Only called when owns_expert_weights().
  virtual void fetch_expert(std::int32_t /*block*/, std::int32_t /*expert*/, const Executor* /*source*/,
                            Completion /*done*/) {
    assert(false && "fetch_expert on a backend whose devices share the weights");
  }
  // Frees this device's copy of (block, expert). Only when no execution of it is in flight.
  virtual void drop_expert(std::int32_t /*block*/, std::int32_t /*expert*/) {}

  // Whether attention and sampling read the sequences' block tables and sampling settings.
  // A backend without KV storage or logits (sim) says no, and the worker skips looking them
  // up: one hash lookup per request per block, a few percent of the simulator's time.
  virtual bool reads_sequences() const { return true; }

  // Returns once the work handed to this device so far has ended; nothing is handed to it
  // after. A deployment that goes while its devices compute (a service ended by a signal leaves
  // its loop then) calls it on every executor before the batches and caches they read go.
  virtual void finish() {}

  // The policy the worker runs from now on (at a safe point). A backend that models rather
  // than pays what a policy costs outside its kernels (the sim: a synchronous engine's
  // all-to-all collectives and host scheduling) prices it from here; real backends pay it.
  virtual void on_policy(const RuntimePolicy& /*policy*/) {}
  // The gate of an async μ-queue of this kind, from this backend's cost of such an execution
  // (MuQueueGate::from_cost); nothing when the backend has no cost model (it then runs every
  // queue the scheduler picks).
  virtual std::optional<MuQueueGate> gate(LayerKind /*kind*/) const { return std::nullopt; }
};

}  // namespace sy
