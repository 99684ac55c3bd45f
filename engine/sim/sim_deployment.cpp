#include "engine/sim/sim_deployment.h"

#include "engine/sim/skew_router.h"

namespace sy {
namespace {

using ExecutorList = std::shared_ptr<std::vector<const SimExecutor*>>;

DeploymentOptions with_cost_model(DeploymentOptions o, const ModelConfig& config, const HardwareProfile& hw,
                                  std::int32_t devices) {
  // Simulated devices only exist on virtual time (paced to the wall clock when watched live).
  o.clock = Clock::Virtual;
  if (!o.cost_model) {
    auto roofline =
        std::make_shared<RooflineCostModel>(hw, config, 1, sync_baseline_costs(hw, devices, o.link.devices_per_node));
    // Executions of up to 512 rows (every decode batch we simulate) look their costs up.
    roofline->tabulate_rows(512);
    o.cost_model = std::move(roofline);
  }
  if (!o.skew_routing)
    o.skew_routing = std::make_shared<SkewRouting>(config.num_layers, config.num_experts, o.skew_lambda.value_or(0.0),
                                                   o.skew_seed);
  return o;
}

Cluster::ExecutorFactory sim_executors(const ModelConfig& config, const DeploymentOptions& options, double pcie_gbps,
                                       ExecutorList list) {
  // An attention rank's KV pages in bf16: K and V of every layer.
  const std::int64_t kv_bytes = static_cast<std::int64_t>(options.kv_pages_per_rank) * options.page_size *
                                config.num_layers * config.num_kv_heads * config.head_dim * 2 * 2;
  return [config, cost = options.cost_model.get(), trace = options.routing_trace.get(), skew = options.skew_routing, list,
          link = options.link, pcie_gbps, kv_bytes](std::int32_t device, bool attention_rank, EventLoop& loop) {
    SimExecutorOptions o;
    o.cost_model = cost;
    o.skew = skew;
    o.routing_trace = trace;
    o.device = device;
    o.link = link;
    o.host_bytes_per_ns = pcie_gbps;  // GB/s == bytes/ns
    o.kv_bytes = attention_rank ? kv_bytes : 0;
    auto ex = std::make_unique<SimExecutor>(config, o, loop);
    list->push_back(ex.get());
    return std::unique_ptr<Executor>(std::move(ex));
  };
}

// Devices whose layout gives no memory_gb have the profile's memory.
Topology with_device_memory(Topology t, const HardwareProfile& hw) {
  t.device_memory_bytes.resize(static_cast<std::size_t>(t.num_devices), 0);
  for (std::int64_t& bytes : t.device_memory_bytes)
    if (bytes <= 0) bytes = static_cast<std::int64_t>(hw.memory_gib * 1024.0 * 1024.0 * 1024.0);
  return t;
}

}  // namespace

LinkModel profile_links(const HardwareProfile& hw, std::int32_t devices_per_node) {
  LinkModel link;
  // GB/s == bytes/ns. Without NVLink the devices of a node talk over PCIe.
  const bool nvlink = hw.nvlink_gbps > 0;
  link.bytes_per_ns = nvlink ? hw.nvlink_gbps : hw.pcie_gbps;
  link.latency_ns = static_cast<std::int64_t>((nvlink ? hw.nvlink_latency_us : hw.nic_latency_us) * 1e3);
  link.devices_per_node = devices_per_node;
  link.inter_node_bytes_per_ns = hw.nic_gbps;
  link.inter_node_latency_ns = static_cast<std::int64_t>(hw.nic_latency_us * 1e3);
  link.shared_ports = true;
  return link;
}

SimDeployment::SimDeployment(const ModelConfig& config, const HardwareProfile& hw, Topology topology,
                             DeploymentOptions options)
    : SimDeployment(config, hw, with_cost_model(std::move(options), config, hw, topology.num_devices),
                    with_device_memory(topology, hw),
                    std::make_shared<std::vector<const SimExecutor*>>()) {}

SimDeployment::SimDeployment(const ModelConfig& config, const HardwareProfile& hw, DeploymentOptions options,
                             Topology topology, std::shared_ptr<std::vector<const SimExecutor*>> executors)
    // bf16 activations cross the links.
    : Deployment(std::move(topology), options, static_cast<std::int64_t>(config.hidden_size) * 2,
                 sim_executors(config, options, hw.pcie_gbps, executors)),
      executors_(std::move(executors)) {}

std::int64_t SimDeployment::trace_lookups() const {
  std::int64_t n = 0;
  for (const SimExecutor* e : *executors_) n += e->trace_lookups();
  return n;
}

std::int64_t SimDeployment::trace_misses() const {
  std::int64_t n = 0;
  for (const SimExecutor* e : *executors_) n += e->trace_misses();
  return n;
}

}  // namespace sy
