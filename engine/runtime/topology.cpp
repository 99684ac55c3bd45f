#include "engine/runtime/topology.h"

#include <algorithm>

namespace sy {
namespace {

Topology base(const ModelConfig& c, std::int32_t devices) {
  Topology t;
  t.num_devices = devices;
  t.num_blocks = c.num_layers;
  t.num_experts = c.num_experts;
  t.top_k = c.top_k;
  t.sparse = c.sparse_layers;
  t.device_rank.assign(static_cast<std::size_t>(devices), -1);
  for (std::int32_t d = 0; d < devices; ++d) t.device_names.push_back("dev" + std::to_string(d));
  t.expert_devices.assign(static_cast<std::size_t>(c.num_layers), {});
  return t;
}

void place_round_robin(Topology& t, std::int32_t first_device, std::int32_t devices) {
  for (std::int32_t b = 0; b < t.num_blocks; ++b) {
    if (!t.sparse[b]) continue;
    t.expert_devices[b].assign(static_cast<std::size_t>(t.num_experts), {});
    for (std::int32_t e = 0; e < t.num_experts; ++e) t.expert_devices[b][e] = {first_device + e % devices};
  }
}

}  // namespace

void Topology::finalize() {
  device_rank.assign(static_cast<std::size_t>(num_devices), -1);
  for (std::int32_t r = 0; r < num_ranks(); ++r) device_rank[rank_device[r]] = r;
  block_expert_devices.assign(static_cast<std::size_t>(num_blocks), {});
  device_expert_ids.assign(static_cast<std::size_t>(num_devices), {});
  for (std::int32_t b = 0; b < num_blocks; ++b) {
    if (!sparse[b]) continue;
    auto& devs = block_expert_devices[b];
    for (std::int32_t e = 0; e < num_experts; ++e) {
      for (std::int32_t d : expert_devices[b][e]) {
        devs.push_back(d);
        device_expert_ids[d].push_back(e);
      }
    }
    std::sort(devs.begin(), devs.end());
    devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
  }
  for (auto& ids : device_expert_ids) {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  }
}

Status Topology::validate_placement(const ExpertPlacement& placement) const {
  if (static_cast<std::int32_t>(placement.size()) != num_blocks)
    return Status::Error("placement has " + std::to_string(placement.size()) + " blocks, the model has " +
                         std::to_string(num_blocks));
  for (std::int32_t b = 0; b < num_blocks; ++b) {
    const auto& experts = placement[static_cast<std::size_t>(b)];
    const std::string where = "block " + std::to_string(b);
    if (!sparse[b]) {
      if (!experts.empty()) return Status::Error(where + " is dense (no routed experts) but the placement lists experts");
      continue;
    }
    if (static_cast<std::int32_t>(experts.size()) != num_experts)
      return Status::Error(where + " lists " + std::to_string(experts.size()) + " experts, the model has " +
                           std::to_string(num_experts));
    for (std::int32_t e = 0; e < num_experts; ++e) {
      const auto& devices = experts[static_cast<std::size_t>(e)];
      const std::string what = where + " expert " + std::to_string(e);
      if (devices.empty()) return Status::Error(what + " is placed on no device");
      for (std::size_t i = 0; i < devices.size(); ++i) {
        const std::int32_t d = devices[i];
        if (d < 0 || d >= num_devices)
          return Status::Error(what + ": device " + std::to_string(d) + " does not exist (devices 0-" +
                               std::to_string(num_devices - 1) + ")");
        if (std::find(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(i), d) !=
            devices.begin() + static_cast<std::ptrdiff_t>(i))
          return Status::Error(what + ": device " + std::to_string(d) + " is listed twice");
      }
    }
  }
  return Status::Ok();
}

Topology Topology::from_layout(const Layout& layout, const ModelConfig& c) {
  Topology t = base(c, layout.num_devices());
  t.device_names.clear();
  for (const DeviceSpec& d : layout.devices) t.device_names.push_back(d.name);
  t.rank_device = layout.attention_devices();
  for (std::int32_t b = 0; b < t.num_blocks; ++b) {
    if (!t.sparse[b]) continue;
    t.expert_devices[b].assign(static_cast<std::size_t>(t.num_experts), {});
    for (std::int32_t e = 0; e < t.num_experts; ++e) t.expert_devices[b][e] = layout.placement.devices(b, e);
  }
  t.finalize();
  return t;
}

Topology Topology::colocated(const ModelConfig& c, std::int32_t devices) {
  Topology t = base(c, devices);
  for (std::int32_t d = 0; d < devices; ++d) t.rank_device.push_back(d);
  place_round_robin(t, 0, devices);
  t.finalize();
  return t;
}

Topology Topology::disaggregated(const ModelConfig& c, std::int32_t attention, std::int32_t experts) {
  Topology t = base(c, attention + experts);
  for (std::int32_t d = 0; d < attention; ++d) t.rank_device.push_back(d);
  place_round_robin(t, attention, experts);
  t.finalize();
  return t;
}

}  // namespace sy
