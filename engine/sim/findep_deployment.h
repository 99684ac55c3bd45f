// FinDEP's solver for a running deployment: its model shape, attention and expert devices, the
// backend's α + β·x models, the batch per attention rank and the mean context of the running
// requests, mapped to a FindepProblem, and the solver's choice as a findep policy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/model/model_config.h"
#include "engine/runtime/policy_spec.h"
#include "engine/runtime/topology.h"
#include "engine/sim/findep_model.h"

namespace sy {

// The α + β·x models a deployment's backend plans with, and where they came from (a profile's
// [findep] table, or derived from its roofline); null primitives: none, and `source` says why.
struct FindepCostBasis {
  ModelConfig config;
  std::optional<FindepPrimitives> primitives;
  std::string source;
};

// What the solver needs to know of a deployment at one moment.
struct FindepDeployment {
  FindepModelDims dims;
  std::int64_t attention_ranks = 1;  // ag
  std::int64_t expert_devices = 1;   // eg: devices holding routed experts
  FindepPrimitives primitives;
  std::int64_t batch_per_rank = 1;  // samples an attention rank runs per decode step (r1 · m_a ≤ this)
  double mean_context = 1;          // cached positions a decode row attends to, on average
};

// FinDEP's dimensions of a model: a qwen2_moe shared expert counts as one shared expert of its
// own FFN width; layers are the sparse blocks.
FindepModelDims findep_dims(const ModelConfig& config);
FindepDeployment findep_deployment(const ModelConfig& config, const Topology& topology,
                                   const FindepPrimitives& primitives, std::int64_t batch_per_rank,
                                   double mean_context);
// The decode step as FinDEP's schedule: S = 1 query token per sample, attending to the mean
// context (FinDEP formulates prefill, S tokens attending to S); B samples per attention rank.
FindepProblem findep_problem(const FindepDeployment& d);

// Algorithm 1 on the deployment; refused when the backend has no cost models.
StatusOr<FindepSolution> solve_findep_for(const FindepCostBasis& basis, const Topology& topology,
                                          std::int64_t batch_per_rank, double mean_context);
// `spec` as findep with the solution's r1, r2 and order.
PolicySpec findep_policy_spec(PolicySpec spec, const FindepSolution& solution);
// What a reply or a run's output says of the choice: m_a, r1, r2, order, predicted tokens/s,
// and what the solver planned with.
nlohmann::json findep_choice_json(const FindepSolution& solution, const FindepCostBasis& basis,
                                  const Topology& topology, std::int64_t batch_per_rank, double mean_context);
// One line of the same, for a command's output.
std::string describe_findep_choice(const FindepSolution& solution, const FindepCostBasis& basis);

}  // namespace sy
