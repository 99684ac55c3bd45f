// The spans of one timeline lane (one device, one of compute/send/receive), kept sorted by start
// time with a running maximum of end times, so that visibility and level-of-detail queries are
// binary searches even when transfer spans overlap. Storage is compact: the newest spans stay
// as records, older ones are sealed into zstd-compressed chunks of kChunk spans (the trace
// block codec, about 3-4 bytes a span on the demo) that are decoded on access into a small cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "telemetry/events.h"

namespace sy::console {

class LaneSpans {
 public:
  static constexpr std::size_t kChunk = 4096;

  LaneSpans();
  ~LaneSpans();
  LaneSpans(LaneSpans&&) noexcept;
  LaneSpans& operator=(LaneSpans&&) noexcept;
  LaneSpans(const LaneSpans&) = delete;
  LaneSpans& operator=(const LaneSpans&) = delete;

  // Inserts in start order; spans normally arrive in order, so this is an append.
  void add(const telemetry::Span& span);
  // Drops spans that ended before `cutoff_ns` from the front; returns how many went.
  std::size_t drop_ended_before(std::int64_t cutoff_ns);
  // Drops the `n` earliest-starting spans.
  void drop_front(std::size_t n);
  void clear();

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // By value: a sealed span is decoded from its chunk (cached).
  telemetry::Span operator[](std::size_t i) const;
  // Largest end_ns among spans [0, i].
  std::int64_t max_end_through(std::size_t i) const;

  // Index of the first span that may overlap [t, ...): every span before it ended before t.
  std::size_t first_ending_at_or_after(std::int64_t t) const;
  // Index of the first span starting at or after t.
  std::size_t first_starting_at_or_after(std::int64_t t) const;
  // Index of the first span starting after t.
  std::size_t first_starting_after(std::int64_t t) const;

  // Bytes held: sealed chunks' compressed bytes plus the open records (not the decode cache).
  std::size_t held_bytes() const;

 private:
  struct Chunk;
  struct Decoded;
  const Decoded& decoded(std::size_t chunk) const;
  void seal_front_of_tail();
  void insert_into_chunk(std::size_t chunk, const telemetry::Span& span);
  void recompute_running_max(std::size_t from_chunk);
  // (chunk, offset) of logical index i; chunk == chunks_.size() means the tail.
  std::pair<std::size_t, std::size_t> locate(std::size_t i) const;
  // The first logical index not "before": whole chunks are skipped by their bounds, then one
  // chunk (or the tail) is searched.
  template <class ChunkBefore, class InChunk, class InTail>
  std::size_t search(ChunkBefore chunk_before, InChunk in_chunk, InTail in_tail) const;

  // Absolute indices count every span ever held: base_abs_ is logical index 0, the chunks and
  // then the tail follow without gaps (a chunk's front may hold spans already dropped).
  std::deque<Chunk> chunks_;
  std::vector<telemetry::Span> tail_;
  std::vector<std::int64_t> tail_max_end_;
  std::size_t base_abs_ = 0;
  std::size_t tail_abs_begin_ = 0;
  std::size_t size_ = 0;
  std::size_t compressed_bytes_ = 0;
  std::int64_t tail_running_before_ = std::numeric_limits<std::int64_t>::min();
  std::uint64_t next_chunk_id_ = 1;
  mutable std::uint64_t use_tick_ = 0;
  mutable std::unique_ptr<std::deque<Decoded>> cache_;
};

}  // namespace sy::console
