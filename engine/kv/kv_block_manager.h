// The KV block manager of one attention rank (vLLM v1 style): admits requests by reserving
// their pages, hands out their block tables and sampling settings to executions, and releases
// them. It lives beside the coordinator, on the event loop's thread; the sim and cpu backends
// share this one accounting, and executors only ever see block tables.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/kv/kv_block_allocator.h"
#include "engine/kv/sequence_kv.h"
#include "engine/runtime/sequence.h"

namespace sy {

class KvBlockManager {
 public:
  KvBlockManager(std::int32_t num_pages, std::int32_t page_size) : allocator_(num_pages, page_size) {}

  std::int32_t free_pages() const { return allocator_.free_pages(); }
  std::int32_t num_pages() const { return allocator_.num_pages(); }
  std::int32_t pages_for(std::int64_t positions) const { return allocator_.pages_for(positions); }

  // Reserves pages for `positions` positions of `request`; false, with nothing taken, when too
  // few are free.
  bool admit(std::int64_t request, std::int64_t positions, const SamplingSpec& sampling);
  // The manager of an attention rank whose device runs in another process than the coordinator
  // is a mirror: the coordinator's manager allocates, and this one holds the block table it
  // handed out (engine/dist sends it ahead of the request's first rows), so that the workers
  // here read it as they read a local one. Mirrored pages are never this allocator's.
  void adopt(std::int64_t request, std::vector<std::int32_t> pages, const SamplingSpec& sampling);
  void release(std::int64_t request);
  bool holds(std::int64_t request) const { return sequences_.contains(request); }
  // The request's block table and sampling; it must be admitted (asserted). The table stays
  // where it is until release(), whatever else is admitted meanwhile (executions on device
  // threads read it).
  SequenceContext context(std::int64_t request) const;

 private:
  struct Sequence {
    SequenceKv kv;
    SamplingSpec sampling;
    bool adopted = false;  // a mirror's: its pages go back to the coordinator's allocator, not ours
  };
  KvBlockAllocator allocator_;
  std::unordered_map<std::int64_t, Sequence> sequences_;  // node-based: addresses are stable
};

}  // namespace sy
