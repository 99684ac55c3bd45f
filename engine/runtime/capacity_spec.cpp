#include "engine/runtime/capacity_spec.h"

#include <string>

namespace sy {

Status validate_capacity(const CapacitySpec& c) {
  if (c.kv_pages_per_rank < 1)
    return Status::Error("kv_pages_per_rank must be >= 1, got " + std::to_string(c.kv_pages_per_rank));
  if (c.page_size < 1) return Status::Error("page_size must be >= 1, got " + std::to_string(c.page_size));
  if (c.max_batch < 1) return Status::Error("max_batch must be >= 1, got " + std::to_string(c.max_batch));
  return Status::Ok();
}

}  // namespace sy
