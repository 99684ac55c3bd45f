// The token pool of a device that runs attention (AMoE §3.2): a request's residual rows wait
// here until the K expert outputs of each row are back, and leave together with them. Their
// activations stay in the device backend's memory: the pool asks the backend to scatter rows
// into each request's storage and only keeps the handles.
#pragma once

#include <cstdint>
#include <vector>

#include <tsl/robin_map.h>

#include "engine/runtime/activation_ops.h"
#include "engine/runtime/activations.h"
#include "engine/runtime/token_batch.h"

namespace sy {

class TokenPool {
 public:
  // One request's rows whose expert outputs are all back.
  struct Completed {
    std::int64_t request = -1;
    LayerId layer;                  // the layer after the expert block
    std::int32_t group = -1;
    std::int32_t rank = -1;
    std::int32_t first_position = 0;
    std::int32_t rows = 0;
    Activations hidden;        // residual, rows (null without activations)
    Activations slot_outputs;  // rows × K rows, slot row·K + k (null without activations)
    Activations shared_out;    // rows, or null
  };

  // Holds every request's rows of `residual` (already addressed to the layer after the expert
  // block) until rows × k expert outputs have arrived for it. shared_out has a row per row of
  // the batch (qwen2_moe's shared expert) or is null. A request has at most one token batch
  // in flight, so a request is held at most once. shared_to_come: the shared expert runs as an
  // execution of its own (findep), and each request also waits for its rows of absorb_shared().
  void hold(TokenBatch&& residual, std::int32_t k, Activations&& shared_out, bool shared_to_come = false);

  // Takes the shared expert's output rows of held requests (request and position per row;
  // activations when they travel), like absorb().
  void absorb_shared(const TokenBatch& outputs, std::vector<Completed>& done);

  // Takes expert output rows (request and slot per row; activations when they travel).
  // Requests whose last output arrived are moved out of the pool and appended to `done`.
  void absorb(const TokenBatch& outputs, std::vector<Completed>& done);

  bool empty() const { return index_.empty(); }
  std::size_t size() const { return index_.size(); }
  // Entries allocated, held or free: released entries are reused.
  std::size_t capacity() const { return entries_.size(); }

 private:
  // One more output of the entry at `it` is in; the request leaves with its last one.
  // Inline: absorb calls it once per expert output row.
  void count_in(tsl::robin_map<std::int64_t, std::uint32_t>::iterator it, std::vector<Completed>& done) {
    Entry& e = entries_[it->second];
    if (--e.remaining > 0) return;
    release(it, done);
  }
  // The request at `it` leaves the pool: its last output is in.
  void release(tsl::robin_map<std::int64_t, std::uint32_t>::iterator it, std::vector<Completed>& done);
  struct Entry {
    Completed c;
    std::int32_t remaining = 0;
    std::vector<bool> filled;  // debug builds: a slot arriving twice is our bug
  };
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> free_;
  tsl::robin_map<std::int64_t, std::uint32_t> index_;  // request -> entries_ slot
  // Scratch: the entries hold() filled, and where each row of a scatter goes.
  std::vector<std::uint32_t> held_;
  std::vector<TargetRow> targets_;
};

}  // namespace sy
