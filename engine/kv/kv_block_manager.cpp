#include "engine/kv/kv_block_manager.h"

#include <cassert>

namespace sy {

void KvBlockManager::enable_prefix_cache() {
  if (!prefix_) prefix_ = std::make_unique<PrefixCache>(allocator_);
}

std::vector<std::int32_t> KvBlockManager::prefix_hits(std::span<const std::int32_t> prompt) const {
  if (!prefix_ || prompt.empty()) return {};
  const auto before_last = static_cast<std::int32_t>((prompt.size() - 1) / static_cast<std::size_t>(allocator_.page_size()));
  return prefix_->match(prompt, before_last);
}

bool KvBlockManager::fits_with(std::int64_t positions, const std::vector<std::int32_t>& hits) const {
  // A hit nobody references sits among the free pages: sharing it takes it out of them.
  std::int32_t idle_hits = 0;
  for (std::int32_t page : hits) idle_hits += allocator_.references(page) == 0 ? 1 : 0;
  return allocator_.pages_for(positions) - static_cast<std::int32_t>(hits.size()) <= free_pages() - idle_hits;
}

std::optional<std::int32_t> KvBlockManager::admissible(std::int64_t positions, std::span<const std::int32_t> prompt) const {
  const std::vector<std::int32_t> hits = prefix_hits(prompt);
  if (!fits_with(positions, hits)) return std::nullopt;
  return static_cast<std::int32_t>(hits.size());
}

std::int32_t KvBlockManager::cached_pages(std::span<const std::int32_t> prompt) const {
  return static_cast<std::int32_t>(prefix_hits(prompt).size());
}

bool KvBlockManager::fits(std::int64_t positions, std::span<const std::int32_t> prompt) const {
  return fits_with(positions, prefix_hits(prompt));
}

bool KvBlockManager::admit(std::int64_t request, std::int64_t positions, const SamplingSpec& sampling,
                           std::span<const std::int32_t> prompt, std::span<const kernels::TokenBias> logit_bias,
                           const std::shared_ptr<const structured::GuideSpec>& guide) {
  assert(!holds(request));
  Sequence s{SequenceKv{}, sampling, false, 0, {}, {}, 0, {logit_bias.begin(), logit_bias.end()}, nullptr};
  // A request that asks for its prompt's log-probabilities computes every position (vLLM v1
  // skips reading the cache for it too); what it writes is still cached for later requests.
  const std::vector<std::int32_t> hits =
      sampling.prompt_logprobs >= 0 ? std::vector<std::int32_t>{} : prefix_hits(prompt);
  if (!hits.empty()) {
    if (!fits_with(positions, hits)) return false;
    s.kv.share(allocator_, hits);
    s.cached_positions = static_cast<std::int32_t>(hits.size()) * allocator_.page_size();
  }
  if (!s.kv.reserve(allocator_, positions)) {
    s.kv.release(allocator_);
    return false;
  }
  if (keeps_prompt(sampling)) s.prompt.assign(prompt.begin(), prompt.end());
  s.prompt_length = static_cast<std::int32_t>(prompt.size());
  if (guide) s.guide = std::make_unique<structured::Guide>(*guide);
  sequences_.emplace(request, std::move(s));
  return true;
}

std::int32_t KvBlockManager::cached_positions(std::int64_t request) const {
  const auto it = sequences_.find(request);
  return it == sequences_.end() ? 0 : it->second.cached_positions;
}

void KvBlockManager::cache_written(std::int64_t request, std::span<const std::int32_t> tokens) {
  const auto it = sequences_.find(request);
  if (!prefix_ || it == sequences_.end() || it->second.adopted) return;
  const SequenceKv& kv = it->second.kv;
  prefix_->insert(tokens, std::span<const std::int32_t>(kv.block_table(), static_cast<std::size_t>(kv.pages())));
}

void KvBlockManager::adopt(std::int64_t request, std::vector<std::int32_t> pages, const SamplingSpec& sampling,
                           std::span<const std::int32_t> prompt, std::span<const kernels::TokenBias> logit_bias,
                           std::int32_t prompt_length, const std::shared_ptr<const structured::GuideSpec>& guide) {
  assert(!holds(request));
  Sequence s{SequenceKv{}, sampling, true, 0, {}, {}, prompt_length, {logit_bias.begin(), logit_bias.end()}, nullptr};
  s.kv.adopt(std::move(pages));
  if (keeps_prompt(sampling)) s.prompt.assign(prompt.begin(), prompt.end());
  if (guide) s.guide = std::make_unique<structured::Guide>(*guide);
  sequences_.emplace(request, std::move(s));
}

void KvBlockManager::release(std::int64_t request) {
  auto it = sequences_.find(request);
  if (it == sequences_.end()) return;
  if (!it->second.adopted) it->second.kv.release(allocator_);
  sequences_.erase(it);
}

void KvBlockManager::sampled(std::int64_t request, std::int32_t token) {
  const auto it = sequences_.find(request);
  // A request cancelled while its sample ran is released already.
  if (it == sequences_.end()) return;
  if (it->second.sampling.penalized()) it->second.outputs.push_back(token);
  if (it->second.guide) it->second.guide->advance(token);
}

bool KvBlockManager::mid_prompt(std::int64_t request, std::int32_t position) const {
  const auto it = sequences_.find(request);
  return it != sequences_.end() && position + 1 < it->second.prompt_length;
}

SequenceContext KvBlockManager::context(std::int64_t request) const {
  const auto it = sequences_.find(request);
  assert(it != sequences_.end() && "execution of a request that is not admitted");
  const Sequence& s = it->second;
  SequenceContext c{request, s.kv.block_table(), s.kv.pages(), s.sampling, s.outputs, s.prompt, s.logit_bias, {},
                    s.prompt_length};
  if (s.guide) c.allowed = s.guide->mask();
  return c;
}

}  // namespace sy
