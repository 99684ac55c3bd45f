#include "engine/runtime/topology.h"

#include <algorithm>
#include <cassert>

namespace sy {
namespace {

Topology base(const ModelConfig& c, std::int32_t devices) {
  Topology t;
  t.num_devices = devices;
  t.num_blocks = c.num_layers;
  t.num_experts = c.num_experts;
  t.top_k = c.top_k;
  t.vocab_size = c.vocab_size;
  t.hidden_size = c.hidden_size;
  t.sparse = c.sparse_layers;
  t.device_rank.assign(static_cast<std::size_t>(devices), -1);
  t.device_process.assign(static_cast<std::size_t>(devices), 0);
  t.device_gpu.assign(static_cast<std::size_t>(devices), -1);
  for (std::int32_t d = 0; d < devices; ++d) t.device_names.push_back("dev" + std::to_string(d));
  t.placement = Placement(c);
  return t;
}

void place_round_robin(Topology& t, std::int32_t first_device, std::int32_t devices) {
  for (std::int32_t b = 0; b < t.num_blocks; ++b) {
    if (!t.sparse[b]) continue;
    for (std::int32_t e = 0; e < t.num_experts; ++e) {
      const Status s = t.placement.set(b, e, {first_device + e % devices});
      assert(s.ok());
      (void)s;
    }
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
      for (std::int32_t d : placement.devices(b, e)) {
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

Topology Topology::from_layout(const Layout& layout, const ModelConfig& c) {
  Topology t = base(c, layout.num_devices());
  t.device_names.clear();
  t.device_gpu.clear();
  for (const DeviceSpec& d : layout.devices) {
    t.device_names.push_back(d.name);
    t.device_memory_bytes.push_back(static_cast<std::int64_t>(d.memory_gb * 1e9));
    t.device_gpu.push_back(d.gpu);
  }
  t.rank_device = layout.attention_devices();
  t.placement = layout.placement;
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
