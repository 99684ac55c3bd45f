// The token pool of a device that runs attention (AMoE §3.2): a request's residual rows wait
// here until the K expert outputs of each row are back, and leave together with them. Their
// activations stay in the device backend's memory: the pool asks the backend to scatter rows
// into each request's storage and only keeps the handles.
#pragma once

#include <cassert>
#include <cstdint>
#include <functional>
#include <vector>

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
  // Writes into each row of `residual` the entry that holds its request (TokenRow::entry, and
  // kColumnEntry into its columns): the expert rows made from it carry the entry, their outputs
  // carry it back, and absorb() finds the request by it: looking each output's request id up
  // (a hashed table, and a map for collisions) cost more than the rest of absorb's work.
  void hold(TokenBatch& residual, std::int32_t k, Activations&& shared_out, bool shared_to_come = false);

  // Takes the shared expert's output rows of held requests (entry and position per row;
  // activations when they travel), like absorb(), handing each request that completes to
  // on_done as the callback form of absorb() does (findep only: not a per-row path).
  void absorb_shared(const TokenBatch& outputs, const std::function<void(Completed&)>& on_done);
  void absorb_shared(const TokenBatch& outputs, std::vector<Completed>& done) {
    absorb_shared(outputs, [&done](Completed& c) { done.push_back(std::move(c)); });
  }

  // Takes expert output rows (the entry hold() wrote, and a slot, per row; activations when
  // they travel).
  // Requests whose last output arrived are moved out of the pool and appended to `done`.
  void absorb(const TokenBatch& outputs, std::vector<Completed>& done) {
    absorb(outputs, [&done](Completed& c) { done.push_back(std::move(c)); });
  }
  // The same, handing each request that completes to on_done(Completed&) as it completes, in
  // the pool's own storage: on_done takes what it keeps (moving from it is fine), and the entry
  // is reused after. A worker queues a request without activations straight from here: a
  // Completed moved into a list and destroyed from it cost about fifty instructions per
  // request, most of them for its three (null) activation handles.
  template <class OnDone>
  void absorb(const TokenBatch& outputs, OnDone&& on_done) {
    const std::int64_t n = outputs.rows();
    if (n > 0 && !outputs.hidden.null()) scatter_outputs(outputs);
    assert((n == 0 || outputs.has(kColumnEntry)) && "expert outputs carry their token-pool entry");
    // Through a local: on_done might store into the rows' vector as far as the compiler
    // knows, and the pointer was reloaded for every row.
    const TokenRow* const in = outputs.row.data();
    for (std::int64_t r = 0; r < n; ++r) {
      const auto at = static_cast<std::uint32_t>(in[r].entry);
#ifndef NDEBUG
      mark_filled(at, in[r]);
#endif
      count_in(at, on_done);
    }
  }

  // Whether `row`, an expert output in a batch addressed to `layer` and `group`, is one a held
  // request waits for: its entry holds its request for that queue, and its slot is one of the
  // request's (rows × k). absorb() trusts its rows; a peer process's are checked with this first.
  bool awaits(const TokenRow& row, const LayerId& layer, std::int32_t group, std::int32_t k) const;

  // The outputs the entry still awaits (0 for an entry held by no request).
  std::int32_t outputs_awaited(std::int32_t entry) const {
    return entry >= 0 && static_cast<std::size_t>(entry) < entries_.size() ? entries_[static_cast<std::size_t>(entry)].remaining
                                                                           : 0;
  }

  bool empty() const { return held_count_ == 0; }
  std::size_t size() const { return held_count_; }
  // Entries allocated, held or free: released entries are reused.
  std::size_t capacity() const { return entries_.size(); }

 private:
  // One more output of the entry at `at` is in; the request leaves with its last one, handed
  // to on_done where it lies (moving from it is fine: moved-from handles are null, and hold()
  // sets every other field when it reuses the entry). Inline: absorb calls it once per
  // expert output row.
  template <class OnDone>
  void count_in(std::uint32_t at, OnDone& on_done) {
    Entry& e = entries_[at];
    if (--e.remaining > 0) return;
    --held_count_;
    on_done(e.c);
    free_.push_back(at);
  }
  // Every output row into its request's slot storage, in one scatter (rows with activations).
  void scatter_outputs(const TokenBatch& outputs);
  // Debug builds: `row`'s slot of entry `at` is in; arriving twice, or for an entry that does
  // not hold the row's request, is our bug.
  void mark_filled(std::uint32_t at, const TokenRow& row);

  struct Entry {
    Completed c;
    std::int32_t remaining = 0;
    std::vector<bool> filled;  // debug builds: a slot arriving twice is our bug
  };
  std::vector<Entry> entries_;
  std::vector<std::uint32_t> free_;
  std::size_t held_count_ = 0;
  // Scratch: the entries hold() filled, and where each row of a scatter goes.
  std::vector<std::uint32_t> held_;
  std::vector<TargetRow> targets_;
};

}  // namespace sy
