#include "engine/sim/findep_deployment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace sy {

FindepModelDims findep_dims(const ModelConfig& c) {
  FindepModelDims d;
  d.hidden = c.hidden_size;
  d.expert_hidden = c.moe_intermediate_size > 0 ? c.moe_intermediate_size : c.intermediate_size;
  d.heads = c.num_heads;
  d.head_dim_k = c.head_dim;
  d.head_dim_v = c.head_dim;
  d.shared_experts = c.has_shared_expert() ? 1 : 0;
  d.shared_hidden = c.shared_expert_intermediate_size;
  d.experts = c.num_experts;
  d.top_k = c.top_k;
  d.layers = std::max<std::int64_t>(1, std::count(c.sparse_layers.begin(), c.sparse_layers.end(), true));
  d.bytes_per_element = 2;
  return d;
}

FindepDeployment findep_deployment(const ModelConfig& config, const Topology& topology,
                                   const FindepPrimitives& primitives, std::int64_t batch_per_rank,
                                   double mean_context) {
  FindepDeployment d;
  d.dims = findep_dims(config);
  d.attention_ranks = std::max(1, topology.num_ranks());
  std::set<std::int32_t> expert_devices;
  for (const auto& devices : topology.block_expert_devices) expert_devices.insert(devices.begin(), devices.end());
  d.expert_devices = std::max<std::int64_t>(1, static_cast<std::int64_t>(expert_devices.size()));
  d.primitives = primitives;
  d.batch_per_rank = std::max<std::int64_t>(1, batch_per_rank);
  d.mean_context = std::max(1.0, mean_context);
  return d;
}

FindepProblem findep_problem(const FindepDeployment& d) {
  FindepProblem p;
  p.costs = findep_task_costs(d.primitives, d.dims, /*seq_len=*/1, d.expert_devices, d.mean_context);
  p.ag = d.attention_ranks;
  p.experts = std::max<std::int64_t>(1, d.dims.experts);
  p.top_k = std::max<std::int64_t>(1, d.dims.top_k);
  p.seq_len = 1;
  p.layers = d.dims.layers;
  p.max_samples = d.batch_per_rank;
  p.max_r2 = kMaxExpertChunks;
  return p;
}

StatusOr<FindepSolution> solve_findep_for(const FindepCostBasis& basis, const Topology& topology,
                                          std::int64_t batch_per_rank, double mean_context) {
  if (!basis.primitives) return Status::Error("findep: no cost model to solve with: " + basis.source);
  if (basis.config.num_experts <= 0) return Status::Error("findep: the model has no routed experts");
  const FindepSolution s =
      solve_findep(findep_problem(findep_deployment(basis.config, topology, *basis.primitives, batch_per_rank, mean_context)));
  if (s.throughput <= 0) return Status::Error("findep: the solver found no schedule for this deployment");
  return s;
}

PolicySpec findep_policy_spec(PolicySpec spec, const FindepSolution& solution) {
  spec.policy = "findep";
  spec.microbatches = solution.config.r1;
  spec.expert_chunks = solution.config.r2;
  spec.order = solution.config.order == FindepOrder::Aass ? "aass" : "asas";
  return spec;
}

nlohmann::json findep_choice_json(const FindepSolution& solution, const FindepCostBasis& basis,
                                  const Topology& topology, std::int64_t batch_per_rank, double mean_context) {
  const FindepDeployment d =
      findep_deployment(basis.config, topology, basis.primitives.value_or(FindepPrimitives{}), batch_per_rank, mean_context);
  return {{"ma", solution.config.ma},
          {"r1", solution.config.r1},
          {"r2", solution.config.r2},
          {"order", solution.config.order == FindepOrder::Aass ? "aass" : "asas"},
          {"predicted_tokens_per_s", solution.throughput},
          {"attention_ranks", d.attention_ranks},
          {"expert_devices", d.expert_devices},
          {"batch_per_rank", d.batch_per_rank},
          {"mean_context", d.mean_context},
          {"costs", basis.source}};
}

std::string describe_findep_choice(const FindepSolution& solution, const FindepCostBasis& basis) {
  char line[256];
  std::snprintf(line, sizeof line, "findep solver: m_a=%lld r1=%d r2=%d %s, predicted %.0f tokens/s",
                static_cast<long long>(solution.config.ma), solution.config.r1, solution.config.r2,
                order_name(solution.config.order).c_str(), solution.throughput);
  return std::string(line) + " (costs: " + basis.source + ")";
}

}  // namespace sy
