#include "engine/kv/kv_block_manager.h"

#include <cassert>

namespace sy {

bool KvBlockManager::admit(std::int64_t request, std::int64_t positions, const SamplingSpec& sampling) {
  assert(!holds(request));
  Sequence s{SequenceKv{}, sampling};
  if (!s.kv.reserve(allocator_, positions)) return false;
  sequences_.emplace(request, std::move(s));
  return true;
}

void KvBlockManager::adopt(std::int64_t request, std::vector<std::int32_t> pages, const SamplingSpec& sampling) {
  assert(!holds(request));
  Sequence s{SequenceKv{}, sampling, true};
  s.kv.adopt(std::move(pages));
  sequences_.emplace(request, std::move(s));
}

void KvBlockManager::release(std::int64_t request) {
  auto it = sequences_.find(request);
  if (it == sequences_.end()) return;
  if (!it->second.adopted) it->second.kv.release(allocator_);
  sequences_.erase(it);
}

SequenceContext KvBlockManager::context(std::int64_t request) const {
  const auto it = sequences_.find(request);
  assert(it != sequences_.end() && "execution of a request that is not admitted");
  return SequenceContext{request, it->second.kv.block_table(), it->second.kv.pages(), it->second.sampling};
}

}  // namespace sy
