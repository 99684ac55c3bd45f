#include "console/model/lane_spans.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <span>

#include "telemetry/trace_block_codec.h"

namespace sy::console {

using telemetry::Span;

namespace {

constexpr std::int64_t kNoEnd = std::numeric_limits<std::int64_t>::min();
// Decoded chunks kept per lane: a frame that folds spans touches the chunks of its view, which
// the timeline keeps narrow enough (wider views draw window aggregates instead).
constexpr std::size_t kCacheEntries = 24;
// Level 1 compresses about as well as the recorder's level 3 on these columns, at twice the speed.
constexpr int kZstdLevel = 1;

}  // namespace

struct LaneSpans::Chunk {
  std::uint64_t id = 0;
  std::int32_t device = 0;
  std::size_t abs_begin = 0;  // absolute index of its first span
  std::uint32_t count = 0;
  std::uint32_t raw_bytes = 0;
  telemetry::BlockCodec codec = telemetry::BlockCodec::Zstd;
  std::string data;
  std::int64_t first_start = 0, last_start = 0;
  std::int64_t own_max_end = kNoEnd;
  std::int64_t running_before = kNoEnd;  // largest end of every span before this chunk
  std::int64_t running_max_end = kNoEnd;
};

struct LaneSpans::Decoded {
  std::uint64_t id = 0;
  std::uint64_t used = 0;
  std::vector<Span> spans;
  std::vector<std::int64_t> max_end;
};

LaneSpans::LaneSpans() = default;
LaneSpans::~LaneSpans() = default;
LaneSpans::LaneSpans(LaneSpans&&) noexcept = default;
LaneSpans& LaneSpans::operator=(LaneSpans&&) noexcept = default;

std::pair<std::size_t, std::size_t> LaneSpans::locate(std::size_t i) const {
  const std::size_t a = base_abs_ + i;
  if (a >= tail_abs_begin_) return {chunks_.size(), a - tail_abs_begin_};
  // Chunks normally hold kChunk spans each: try the arithmetic first.
  const std::size_t first = chunks_.front().abs_begin;
  std::size_t c = std::min((a - first) / kChunk, chunks_.size() - 1);
  if (!(chunks_[c].abs_begin <= a && a < chunks_[c].abs_begin + chunks_[c].count)) {
    auto it = std::upper_bound(chunks_.begin(), chunks_.end(), a,
                               [](std::size_t v, const Chunk& ch) { return v < ch.abs_begin; });
    c = static_cast<std::size_t>(it - chunks_.begin()) - 1;
  }
  return {c, a - chunks_[c].abs_begin};
}

const LaneSpans::Decoded& LaneSpans::decoded(std::size_t c) const {
  if (!cache_) cache_ = std::make_unique<std::deque<Decoded>>();
  const Chunk& chunk = chunks_[c];
  for (Decoded& d : *cache_) {
    if (d.id == chunk.id) {
      d.used = ++use_tick_;
      return d;
    }
  }
  Decoded* slot = nullptr;
  if (cache_->size() < kCacheEntries) {
    slot = &cache_->emplace_back();
  } else {
    slot = &*std::min_element(cache_->begin(), cache_->end(),
                              [](const Decoded& a, const Decoded& b) { return a.used < b.used; });
  }
  slot->id = chunk.id;
  slot->used = ++use_tick_;
  slot->spans.clear();
  const Status s = telemetry::decode_span_block(chunk.device, chunk.first_start, chunk.count, chunk.codec, chunk.data,
                                                chunk.raw_bytes, slot->spans);
  // We encoded it ourselves: a failure is our bug, not the user's input.
  assert(s.ok() && slot->spans.size() == chunk.count);
  (void)s;
  slot->spans.resize(chunk.count);
  slot->max_end.resize(chunk.count);
  std::int64_t running = chunk.running_before;
  for (std::size_t j = 0; j < chunk.count; ++j) {
    running = std::max(running, slot->spans[j].end_ns);
    slot->max_end[j] = running;
  }
  return *slot;
}

Span LaneSpans::operator[](std::size_t i) const {
  const auto [c, off] = locate(i);
  if (c == chunks_.size()) return tail_[off];
  return decoded(c).spans[off];
}

std::int64_t LaneSpans::max_end_through(std::size_t i) const {
  const auto [c, off] = locate(i);
  if (c == chunks_.size()) return tail_max_end_[off];
  return decoded(c).max_end[off];
}

void LaneSpans::recompute_running_max(std::size_t from) {
  std::int64_t running = from == 0 ? kNoEnd : chunks_[from - 1].running_max_end;
  if (from == 0 && !chunks_.empty()) running = chunks_[0].running_before;
  for (std::size_t c = from; c < chunks_.size(); ++c) {
    chunks_[c].running_before = running;
    running = std::max(running, chunks_[c].own_max_end);
    chunks_[c].running_max_end = running;
  }
  for (std::size_t j = 0; j < tail_.size(); ++j) {
    running = std::max(running, tail_[j].end_ns);
    tail_max_end_[j] = running;
  }
  if (cache_) cache_->clear();
}

void LaneSpans::seal_front_of_tail() {
  Chunk chunk;
  chunk.id = next_chunk_id_++;
  chunk.device = tail_.front().device;
  chunk.abs_begin = tail_abs_begin_;
  chunk.count = static_cast<std::uint32_t>(kChunk);
  chunk.first_start = tail_.front().start_ns;
  chunk.last_start = tail_[kChunk - 1].start_ns;
  chunk.running_before = chunks_.empty() ? tail_running_before_ : chunks_.back().running_max_end;
  for (std::size_t j = 0; j < kChunk; ++j) chunk.own_max_end = std::max(chunk.own_max_end, tail_[j].end_ns);
  chunk.running_max_end = std::max(chunk.running_before, chunk.own_max_end);
  auto block = telemetry::encode_span_block(chunk.device, std::span<const Span>(tail_.data(), kChunk),
                                            telemetry::BlockCodec::Zstd, kZstdLevel);
  chunk.codec = block.codec;
  chunk.raw_bytes = block.raw_bytes;
  chunk.data = std::move(block.data);
  chunk.data.shrink_to_fit();
  compressed_bytes_ += chunk.data.size();
  chunks_.push_back(std::move(chunk));
  tail_.erase(tail_.begin(), tail_.begin() + static_cast<std::ptrdiff_t>(kChunk));
  tail_max_end_.erase(tail_max_end_.begin(), tail_max_end_.begin() + static_cast<std::ptrdiff_t>(kChunk));
  tail_abs_begin_ += kChunk;
}

void LaneSpans::insert_into_chunk(std::size_t c, const Span& span) {
  Chunk& chunk = chunks_[c];
  std::vector<Span> spans = decoded(c).spans;
  auto pos = std::upper_bound(spans.begin(), spans.end(), span.start_ns,
                              [](std::int64_t t, const Span& s) { return t < s.start_ns; });
  // Never among the spans already dropped from the front.
  const std::size_t skip = c == 0 && base_abs_ > chunk.abs_begin ? base_abs_ - chunk.abs_begin : 0;
  if (static_cast<std::size_t>(pos - spans.begin()) < skip) pos = spans.begin() + static_cast<std::ptrdiff_t>(skip);
  spans.insert(pos, span);
  auto block = telemetry::encode_span_block(chunk.device, spans, telemetry::BlockCodec::Zstd, kZstdLevel);
  compressed_bytes_ -= chunk.data.size();
  chunk.codec = block.codec;
  chunk.raw_bytes = block.raw_bytes;
  chunk.data = std::move(block.data);
  compressed_bytes_ += chunk.data.size();
  chunk.id = next_chunk_id_++;
  ++chunk.count;
  chunk.first_start = spans.front().start_ns;
  chunk.last_start = spans.back().start_ns;
  chunk.own_max_end = std::max(chunk.own_max_end, span.end_ns);
  for (std::size_t k = c + 1; k < chunks_.size(); ++k) ++chunks_[k].abs_begin;
  ++tail_abs_begin_;
  recompute_running_max(c);
}

void LaneSpans::add(const Span& span) {
  ++size_;
  const bool after_chunks = chunks_.empty() || span.start_ns >= chunks_.back().last_start;
  if (after_chunks) {
    if (tail_.empty() || tail_.back().start_ns <= span.start_ns) {
      const std::int64_t prev = tail_max_end_.empty()
                                    ? (chunks_.empty() ? tail_running_before_ : chunks_.back().running_max_end)
                                    : tail_max_end_.back();
      tail_.push_back(span);
      tail_max_end_.push_back(std::max(prev, span.end_ns));
    } else {
      // Late arrival: insert after every span that starts no later, then repair the running maximum.
      auto pos = std::upper_bound(tail_.begin(), tail_.end(), span.start_ns,
                                  [](std::int64_t t, const Span& s) { return t < s.start_ns; });
      const auto index = static_cast<std::size_t>(pos - tail_.begin());
      tail_.insert(pos, span);
      tail_max_end_.insert(tail_max_end_.begin() + static_cast<std::ptrdiff_t>(index), 0);
      std::int64_t running = index == 0 ? (chunks_.empty() ? tail_running_before_ : chunks_.back().running_max_end)
                                        : tail_max_end_[index - 1];
      for (std::size_t j = index; j < tail_.size(); ++j) {
        running = std::max(running, tail_[j].end_ns);
        tail_max_end_[j] = running;
      }
    }
    // The newest kChunk spans stay records, so that late arrivals and the live edge cost nothing.
    if (tail_.size() >= 2 * kChunk) seal_front_of_tail();
    return;
  }
  // Later than the open records allow: re-encode the sealed chunk it belongs in (rare).
  auto it = std::upper_bound(chunks_.begin(), chunks_.end(), span.start_ns,
                             [](std::int64_t t, const Chunk& ch) { return t < ch.first_start; });
  const std::size_t c = it == chunks_.begin() ? 0 : static_cast<std::size_t>(it - chunks_.begin()) - 1;
  insert_into_chunk(c, span);
}

std::size_t LaneSpans::drop_ended_before(std::int64_t cutoff_ns) {
  std::size_t n = 0;
  while (n < size_) {
    const auto [c, off] = locate(n);
    if (c == chunks_.size()) {
      for (std::size_t j = off; j < tail_.size() && tail_[j].end_ns < cutoff_ns; ++j) ++n;
      break;
    }
    // Whole chunks whose every span ended before the cutoff go without decoding.
    if (off == 0 && chunks_[c].own_max_end < cutoff_ns) {
      n += chunks_[c].count;
      continue;
    }
    if ((*this)[n].end_ns >= cutoff_ns) break;
    ++n;
  }
  drop_front(n);
  return n;
}

void LaneSpans::drop_front(std::size_t n) {
  n = std::min(n, size_);
  if (n == 0) return;
  base_abs_ += n;
  size_ -= n;
  while (!chunks_.empty() && chunks_.front().abs_begin + chunks_.front().count <= base_abs_) {
    compressed_bytes_ -= chunks_.front().data.size();
    tail_running_before_ = chunks_.front().running_max_end;
    chunks_.pop_front();
  }
  if (base_abs_ > tail_abs_begin_) {
    const std::size_t k = base_abs_ - tail_abs_begin_;
    if (k > 0) tail_running_before_ = tail_max_end_[k - 1];
    tail_.erase(tail_.begin(), tail_.begin() + static_cast<std::ptrdiff_t>(k));
    tail_max_end_.erase(tail_max_end_.begin(), tail_max_end_.begin() + static_cast<std::ptrdiff_t>(k));
    tail_abs_begin_ = base_abs_;
  }
}

void LaneSpans::clear() {
  chunks_.clear();
  tail_.clear();
  tail_max_end_.clear();
  size_ = 0;
  base_abs_ = tail_abs_begin_ = 0;
  compressed_bytes_ = 0;
  tail_running_before_ = kNoEnd;
  if (cache_) cache_->clear();
}

template <class ChunkBefore, class InChunk, class InTail>
std::size_t LaneSpans::search(ChunkBefore chunk_before, InChunk in_chunk, InTail in_tail) const {
  std::size_t lo = 0, hi = chunks_.size();
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (chunk_before(chunks_[mid]))
      lo = mid + 1;
    else
      hi = mid;
  }
  std::size_t abs = 0;
  if (lo < chunks_.size())
    abs = chunks_[lo].abs_begin + in_chunk(decoded(lo));
  else
    abs = tail_abs_begin_ + in_tail();
  return abs <= base_abs_ ? 0 : std::min(abs - base_abs_, size_);
}

std::size_t LaneSpans::first_ending_at_or_after(std::int64_t t) const {
  return search([t](const Chunk& c) { return c.running_max_end < t; },
                [t](const Decoded& d) {
                  return static_cast<std::size_t>(std::lower_bound(d.max_end.begin(), d.max_end.end(), t) -
                                                  d.max_end.begin());
                },
                [&] {
                  return static_cast<std::size_t>(std::lower_bound(tail_max_end_.begin(), tail_max_end_.end(), t) -
                                                  tail_max_end_.begin());
                });
}

std::size_t LaneSpans::first_starting_at_or_after(std::int64_t t) const {
  auto in = [t](const std::vector<Span>& v) {
    return static_cast<std::size_t>(
        std::lower_bound(v.begin(), v.end(), t, [](const Span& s, std::int64_t x) { return s.start_ns < x; }) -
        v.begin());
  };
  return search([t](const Chunk& c) { return c.last_start < t; }, [&](const Decoded& d) { return in(d.spans); },
                [&] { return in(tail_); });
}

std::size_t LaneSpans::first_starting_after(std::int64_t t) const {
  auto in = [t](const std::vector<Span>& v) {
    return static_cast<std::size_t>(
        std::upper_bound(v.begin(), v.end(), t, [](std::int64_t x, const Span& s) { return x < s.start_ns; }) -
        v.begin());
  };
  return search([t](const Chunk& c) { return c.last_start <= t; }, [&](const Decoded& d) { return in(d.spans); },
                [&] { return in(tail_); });
}

std::size_t LaneSpans::held_bytes() const {
  return compressed_bytes_ + chunks_.size() * sizeof(Chunk) +
         tail_.capacity() * (sizeof(Span) + sizeof(std::int64_t));
}

}  // namespace sy::console
