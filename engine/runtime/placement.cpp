#include "engine/runtime/placement.h"

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>

namespace sy {

Placement::Placement(std::int32_t num_blocks, std::int32_t num_experts, std::vector<bool> sparse)
    : num_experts_(num_experts), sparse_(std::move(sparse)) {
  assert(num_blocks >= 0 && num_experts >= 0 && sparse_.size() == static_cast<std::size_t>(num_blocks));
  (void)num_blocks;
  slots_.resize(sparse_.size());
  for (std::size_t b = 0; b < sparse_.size(); ++b)
    if (sparse_[b]) slots_[b].resize(static_cast<std::size_t>(num_experts_));
}

Placement::Placement(const ModelConfig& config)
    : Placement(config.num_layers, config.num_experts, config.sparse_layers) {}

const std::vector<std::int32_t>& Placement::devices(std::int32_t block, std::int32_t expert) const {
  static const std::vector<std::int32_t> kNone;
  assert(block >= 0 && block < num_blocks() && expert >= 0 && expert < num_experts_);
  if (!sparse_[static_cast<std::size_t>(block)]) return kNone;
  return slots_[static_cast<std::size_t>(block)][static_cast<std::size_t>(expert)];
}

bool Placement::holds(std::int32_t block, std::int32_t expert, std::int32_t device) const {
  const auto& d = devices(block, expert);
  return std::binary_search(d.begin(), d.end(), device);
}

std::vector<BlockExpert> Placement::experts_on(std::int32_t device) const {
  std::vector<BlockExpert> out;
  for (std::int32_t b = 0; b < num_blocks(); ++b) {
    if (!is_sparse(b)) continue;
    for (std::int32_t e = 0; e < num_experts_; ++e)
      if (holds(b, e, device)) out.push_back({b, e});
  }
  return out;
}

Status Placement::check_slot(std::int32_t block, std::int32_t expert) const {
  if (block < 0 || block >= num_blocks())
    return Status::Error("block " + std::to_string(block) + " is out of range (the model has " +
                         std::to_string(num_blocks()) + " blocks)");
  if (!is_sparse(block)) return Status::Error("block " + std::to_string(block) + " is dense (it has no experts)");
  if (expert < 0 || expert >= num_experts_)
    return Status::Error("expert " + std::to_string(expert) + " is out of range (the model has " +
                         std::to_string(num_experts_) + " experts)");
  return Status::Ok();
}

Status Placement::set(std::int32_t block, std::int32_t expert, std::vector<std::int32_t> devices) {
  SY_RETURN_IF_ERROR(check_slot(block, expert));
  std::sort(devices.begin(), devices.end());
  if (!devices.empty() && devices.front() < 0)
    return Status::Error("block " + std::to_string(block) + " expert " + std::to_string(expert) +
                         ": negative device index " + std::to_string(devices.front()));
  if (auto dup = std::adjacent_find(devices.begin(), devices.end()); dup != devices.end())
    return Status::Error("block " + std::to_string(block) + " expert " + std::to_string(expert) + ": device " +
                         std::to_string(*dup) + " listed twice");
  slots_[static_cast<std::size_t>(block)][static_cast<std::size_t>(expert)] = std::move(devices);
  return Status::Ok();
}

Status Placement::add(std::int32_t block, std::int32_t expert, std::int32_t device) {
  SY_RETURN_IF_ERROR(check_slot(block, expert));
  std::vector<std::int32_t> d = devices(block, expert);
  d.push_back(device);
  return set(block, expert, std::move(d));
}

Status Placement::validate(std::int32_t num_devices) const {
  for (std::int32_t b = 0; b < num_blocks(); ++b) {
    if (!is_sparse(b)) continue;
    for (std::int32_t e = 0; e < num_experts_; ++e) {
      const auto& d = devices(b, e);
      if (d.empty())
        return Status::Error("block " + std::to_string(b) + " expert " + std::to_string(e) +
                             " is placed on no device");
      if (d.back() >= num_devices)
        return Status::Error("block " + std::to_string(b) + " expert " + std::to_string(e) + " is placed on device " +
                             std::to_string(d.back()) + ", but there are " + std::to_string(num_devices) + " devices");
    }
  }
  return Status::Ok();
}

}  // namespace sy
