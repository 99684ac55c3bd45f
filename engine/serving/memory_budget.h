// What a deployment will allocate on this host, checked against the memory the machine has
// before anything is allocated: a layout whose page counts are in range but beyond the
// machine is an error naming the layout key, not an out-of-memory kill halfway through.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/model/model_config.h"
#include "engine/runtime/topology.h"

namespace sy {

struct MemoryBudget {
  std::int64_t kv_storage_bytes = 0;     // host KV caches of every attention rank (cpu backend)
  std::int64_t kv_accounting_bytes = 0;  // every rank's page accounting (KvBlockAllocator)
  std::int64_t total() const { return kv_storage_bytes + kv_accounting_bytes; }
};

// The host memory a deployment of `topology` with `pages_per_rank` pages of `page_size`
// positions needs; `host_kv` when the backend keeps its KV caches in host memory (cpu).
MemoryBudget memory_budget(const ModelConfig& config, const Topology& topology, std::int64_t pages_per_rank,
                           std::int64_t page_size, bool host_kv);

// MemAvailable of /proc/meminfo in bytes, or -1 when it cannot be read.
std::int64_t available_memory_bytes();

// Ok when `budget` fits in `available` bytes (with room left for weights and activations:
// at most 90 % of it); else an error naming [capacity] kv_pages_per_rank and page_size, what
// they ask for and what the machine has. An unknown `available` (-1) is not checked.
Status check_memory_budget(const MemoryBudget& budget, std::int64_t pages_per_rank, std::int64_t page_size,
                           std::int32_t ranks, std::int64_t available);

// Both of the above against this machine's available memory: what a command calls before it
// deploys.
Status check_host_memory(const ModelConfig& config, const Topology& topology, std::int64_t pages_per_rank,
                         std::int64_t page_size, bool host_kv);

}  // namespace sy
