// The capacity limits of a deployment (KV-cache pages, page size, concurrent requests per
// attention rank) and their check.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace sy {

struct CapacitySpec {
  std::int32_t kv_pages_per_rank = 4096;  // KV-cache pages on each attention rank
  std::int32_t page_size = 16;            // token positions per KV page
  std::int32_t max_batch = 64;            // concurrent requests per attention rank

  bool operator==(const CapacitySpec&) const = default;
};

// Every limit is at least 1; the message names the field and value.
Status validate_capacity(const CapacitySpec& capacity);

}  // namespace sy
