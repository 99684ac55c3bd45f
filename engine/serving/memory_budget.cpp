#include "engine/serving/memory_budget.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/kv/kv_block_allocator.h"

namespace sy {
namespace {

std::string gib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

}  // namespace

MemoryBudget memory_budget(const ModelConfig& config, const Topology& topology, std::int64_t pages_per_rank,
                           std::int64_t page_size, bool host_kv) {
  MemoryBudget b;
  const std::int64_t ranks = topology.num_ranks();
  b.kv_accounting_bytes = ranks * pages_per_rank * KvBlockAllocator::bytes_per_page();
  if (host_kv) {
    // K and V, float32, every layer: what PagedKvCache allocates per rank.
    const std::int64_t per_page = page_size * config.num_layers * config.num_kv_heads * config.head_dim * 2 * 4;
    b.kv_storage_bytes = ranks * pages_per_rank * per_page;
  }
  return b;
}

std::int64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    std::int64_t kib = -1;
    fields >> kib;
    return kib < 0 ? -1 : kib * 1024;
  }
  return -1;
}

Status check_memory_budget(const MemoryBudget& budget, std::int64_t pages_per_rank, std::int64_t page_size,
                           std::int32_t ranks, std::int64_t available) {
  if (available < 0) return Status::Ok();
  if (budget.total() <= available / 10 * 9) return Status::Ok();
  return Status::Error("[capacity] kv_pages_per_rank = " + std::to_string(pages_per_rank) + " with page_size = " +
                       std::to_string(page_size) + " on " + std::to_string(ranks) + " attention rank(s) needs " +
                       gib(budget.total()) + " of host memory (KV caches " + gib(budget.kv_storage_bytes) +
                       ", page tables " + gib(budget.kv_accounting_bytes) + "), but this machine has " + gib(available) +
                       " available: lower kv_pages_per_rank or page_size");
}

Status check_host_memory(const ModelConfig& config, const Topology& topology, std::int64_t pages_per_rank,
                         std::int64_t page_size, bool host_kv) {
  return check_memory_budget(memory_budget(config, topology, pages_per_rank, page_size, host_kv), pages_per_rank,
                             page_size, topology.num_ranks(), available_memory_bytes());
}

}  // namespace sy
