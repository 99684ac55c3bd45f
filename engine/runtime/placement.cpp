#include "engine/runtime/placement.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

namespace sy {

Placement::Placement(std::int32_t num_blocks, std::int32_t num_experts, std::vector<bool> sparse)
    : num_experts_(num_experts), sparse_(std::move(sparse)) {
  assert(num_blocks >= 0 && num_experts >= 0 && sparse_.size() == static_cast<std::size_t>(num_blocks));
  (void)num_blocks;
  slots_.assign(sparse_.size(), std::vector<std::vector<std::int32_t>>(static_cast<std::size_t>(num_experts_)));
}

Placement::Placement(const ModelConfig& config)
    : Placement(config.num_layers, config.num_experts, config.sparse_layers) {}

StatusOr<Placement> Placement::from_json(const nlohmann::json& lists, std::int32_t num_experts,
                                         std::vector<bool> sparse) {
  const auto num_blocks = static_cast<std::int32_t>(sparse.size());
  if (!lists.is_array())
    return Status::Error("placement must be a list with a list per block ([block][expert] -> devices)");
  if (lists.size() != sparse.size())
    return Status::Error("placement has " + std::to_string(lists.size()) + " blocks, the model has " +
                         std::to_string(num_blocks));
  Placement p(num_blocks, num_experts, std::move(sparse));
  for (std::int32_t b = 0; b < num_blocks; ++b) {
    const nlohmann::json& experts = lists[static_cast<std::size_t>(b)];
    const std::string where = "block " + std::to_string(b);
    if (!experts.is_array())
      return Status::Error(where + " must be a list with a list of devices per expert ([block][expert] -> devices)");
    if (!p.is_sparse(b)) {
      if (!experts.empty())
        return Status::Error(where + " is dense (no routed experts) but the placement lists experts");
      continue;
    }
    if (experts.size() != static_cast<std::size_t>(num_experts))
      return Status::Error(where + " lists " + std::to_string(experts.size()) + " experts, the model has " +
                           std::to_string(num_experts));
    for (std::int32_t e = 0; e < num_experts; ++e) {
      const nlohmann::json& list = experts[static_cast<std::size_t>(e)];
      const std::string what = where + " expert " + std::to_string(e);
      if (!list.is_array()) return Status::Error(what + " must be a list of device indices, got " + list.dump());
      std::vector<std::int32_t> devices;
      for (const nlohmann::json& d : list) {
        constexpr auto kMax = std::numeric_limits<std::int32_t>::max();
        constexpr auto kMin = std::numeric_limits<std::int32_t>::min();
        if (!d.is_number_integer()) return Status::Error(what + ": " + d.dump() + " is not a device index");
        if (d.is_number_unsigned() ? d.get<std::uint64_t>() > static_cast<std::uint64_t>(kMax)
                                   : (d.get<std::int64_t>() > kMax || d.get<std::int64_t>() < kMin))
          return Status::Error(what + ": device " + d.dump() + " is out of range");
        devices.push_back(static_cast<std::int32_t>(d.get<std::int64_t>()));
      }
      SY_RETURN_IF_ERROR(p.set(b, e, std::move(devices)));
    }
  }
  return p;
}

nlohmann::json Placement::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (std::int32_t b = 0; b < num_blocks(); ++b)
    out.push_back(is_sparse(b) ? nlohmann::json(slots_[static_cast<std::size_t>(b)]) : nlohmann::json::array());
  return out;
}

bool Placement::holds(std::int32_t block, std::int32_t expert, std::int32_t device) const {
  const auto& d = devices(block, expert);
  return std::binary_search(d.begin(), d.end(), device);
}

std::vector<std::vector<BlockExpert>> Placement::experts_by_device(std::int32_t num_devices) const {
  std::vector<std::vector<BlockExpert>> out(static_cast<std::size_t>(std::max<std::int32_t>(0, num_devices)));
  for (std::int32_t b = 0; b < num_blocks(); ++b) {
    if (!is_sparse(b)) continue;
    for (std::int32_t e = 0; e < num_experts_; ++e)
      for (std::int32_t d : devices(b, e))  // ascending, without repeats (set and add refuse them)
        if (d >= 0 && d < num_devices) out[static_cast<std::size_t>(d)].push_back({b, e});
  }
  return out;
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

Status Placement::check_shape(std::int32_t num_experts, const std::vector<bool>& sparse) const {
  const auto num_blocks_wanted = static_cast<std::int32_t>(sparse.size());
  if (num_blocks() != num_blocks_wanted || num_experts_ != num_experts)
    return Status::Error("placement covers " + std::to_string(num_blocks()) + " blocks x " +
                         std::to_string(num_experts_) + " experts, the model has " +
                         std::to_string(num_blocks_wanted) + " x " + std::to_string(num_experts));
  for (std::int32_t b = 0; b < num_blocks(); ++b)
    if (is_sparse(b) != sparse[static_cast<std::size_t>(b)])
      return Status::Error("placement says block " + std::to_string(b) + " is " + (is_sparse(b) ? "sparse" : "dense") +
                           ", the model disagrees");
  return Status::Ok();
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
