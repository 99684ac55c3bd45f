// The KV block manager of one attention rank (vLLM v1 style): admits requests by reserving
// their pages, hands out their block tables and sampling settings to executions, and releases
// them. It lives beside the coordinator, on the event loop's thread; the sim and cpu backends
// share this one accounting, and executors only ever see block tables.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/kv/kv_block_allocator.h"
#include "engine/kv/prefix_cache.h"
#include "engine/kv/sequence_kv.h"
#include "engine/runtime/sequence.h"
#include "engine/structured/guide.h"

namespace sy {

class KvBlockManager {
 public:
  KvBlockManager(std::int32_t num_pages, std::int32_t page_size) : allocator_(num_pages, page_size) {}

  std::int32_t free_pages() const { return allocator_.free_pages(); }
  std::int32_t num_pages() const { return allocator_.num_pages(); }
  std::int32_t pages_for(std::int64_t positions) const { return allocator_.pages_for(positions); }
  std::int32_t page_size() const { return allocator_.page_size(); }

  // Prefix caching (PrefixCache): off until enabled, and then for good.
  void enable_prefix_cache();
  bool prefix_caching() const { return prefix_ != nullptr; }
  // How many of `prompt`'s leading pages a request admitted now would share from the cache: at
  // most those before the page of its last token, which is always computed (its logits give
  // the first token). 0 without prefix caching.
  std::int32_t cached_pages(std::span<const std::int32_t> prompt) const;
  // Whether a request of `positions` positions with this prompt would be admitted now.
  bool fits(std::int64_t positions, std::span<const std::int32_t> prompt) const;
  // Both at once (one look-up in the cache): the cached pages when it would be admitted now.
  std::optional<std::int32_t> admissible(std::int64_t positions, std::span<const std::int32_t> prompt) const;
  // Reserves pages for `positions` positions of `request`, sharing its prompt's cached leading
  // pages (cached_pages) unless it asks for prompt log-probabilities (it computes every
  // position; pass it an empty prompt in the look-ups above); false, with nothing taken, when
  // too few are free. The prompt is kept for a repetition penalty and for prompt
  // log-probabilities (SequenceContext::prompt); its length always (SequenceContext::prompt_length).
  // `guide`: guided decoding's grammar and vocabulary (null: none); the sequence keeps its own
  // matcher, advanced by sampled(), and its mask is SequenceContext::allowed.
  bool admit(std::int64_t request, std::int64_t positions, const SamplingSpec& sampling,
             std::span<const std::int32_t> prompt = {}, std::span<const kernels::TokenBias> logit_bias = {},
             const std::shared_ptr<const structured::GuideSpec>& guide = nullptr);
  // Positions of an admitted request whose KV came from the cache (a multiple of the page size).
  std::int32_t cached_positions(std::int64_t request) const;
  // The request's KV for these leading tokens (its prompt, then the outputs fed back) is written
  // in every layer: index their full pages for later requests.
  void cache_written(std::int64_t request, std::span<const std::int32_t> tokens);
  // Pages referenced by admitted requests (free_pages() counts cached unreferenced ones as free).
  std::int32_t used_pages() const { return num_pages() - free_pages(); }
  std::int64_t prefix_evictions() const { return allocator_.evictions(); }
  // The manager of an attention rank whose device runs in another process than the coordinator
  // is a mirror: the coordinator's manager allocates, and this one holds the block table it
  // handed out (engine/dist sends it ahead of the request's first rows), so that the workers
  // here read it as they read a local one. Mirrored pages are never this allocator's.
  void adopt(std::int64_t request, std::vector<std::int32_t> pages, const SamplingSpec& sampling,
             std::span<const std::int32_t> prompt = {}, std::span<const kernels::TokenBias> logit_bias = {},
             std::int32_t prompt_length = 0, const std::shared_ptr<const structured::GuideSpec>& guide = nullptr);
  void release(std::int64_t request);
  bool holds(std::int64_t request) const { return sequences_.contains(request); }
  // The request sampled `token` (its worker reports each): kept for its penalties when its
  // sampling has any (SequenceContext::outputs), and fed to its guide when guided.
  void sampled(std::int64_t request, std::int32_t token);
  // Whether a pass whose last row of `request` is at `position` held a chunk of its prompt
  // that is not the last (chunked prefill): its sampler draws no token for it. False for a
  // request not held here or of unknown prompt length.
  bool mid_prompt(std::int64_t request, std::int32_t position) const;
  // Whether a request sampled so keeps its prompt for its sample executions.
  static bool keeps_prompt(const SamplingSpec& sampling) {
    return sampling.repetition_penalty != 1.0f || sampling.prompt_logprobs >= 0;
  }
  // The request's block table and sampling; it must be admitted (asserted). The table stays
  // where it is until release(), whatever else is admitted meanwhile (executions on device
  // threads read it).
  SequenceContext context(std::int64_t request) const;

 private:
  // The cached pages a request with this prompt would share (cached_pages), and whether its
  // positions fit beside them.
  std::vector<std::int32_t> prefix_hits(std::span<const std::int32_t> prompt) const;
  bool fits_with(std::int64_t positions, const std::vector<std::int32_t>& hits) const;

  struct Sequence {
    SequenceKv kv;
    SamplingSpec sampling;
    bool adopted = false;  // a mirror's: its pages go back to the coordinator's allocator, not ours
    std::int32_t cached_positions = 0;
    std::vector<std::int32_t> outputs;  // sampled tokens, when sampling.penalized()
    std::vector<std::int32_t> prompt;   // under a repetition penalty
    std::int32_t prompt_length = 0;
    std::vector<kernels::TokenBias> logit_bias;
    std::unique_ptr<structured::Guide> guide;  // guided decoding, when asked for
  };
  KvBlockAllocator allocator_;
  std::unique_ptr<PrefixCache> prefix_;  // after allocator_: it registers with it
  std::unordered_map<std::int64_t, Sequence> sequences_;  // node-based: addresses are stable
};

}  // namespace sy
