// MegaScale-Infer's deployment plan search (§4.2, Algorithm 1): over tensor-parallel sizes,
// attention and expert node counts and micro-batch counts, the largest batch that meets the
// SLO and memory, ranked by throughput per unit price.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/plan/plan_model.h"

namespace sy {

struct Plan {
  PlanShape shape;
  PlanEstimate estimate;
  // What stops b_a from growing: the first constraint b_a + 1 breaks ("slo: …", "memory: …",
  // "micro-batches: …", "communication: …") or "batch limit" at the search's upper end.
  std::string binding;
};

struct PlanSearchResult {
  std::vector<Plan> plans;     // the best, highest throughput per price first
  std::int64_t shapes = 0;     // (tp_a, n_a, tp_e, n_e, m) tried
  std::int64_t estimates = 0;  // performance-model evaluations
  // Shapes with no feasible batch at all, counted by the kind of their first violation.
  std::map<std::string, std::int64_t> rejected;
};

// Algorithm 1, with two deviations (see plan_search.cpp): n_a is enumerated instead of set by
// BALANCE's closed form, and expert nodes may hold several experts (n_e divides E; the paper's
// n_e = E is one case). `top` plans are kept.
PlanSearchResult search_plans(const PlanInputs& in, std::int32_t top);

// The largest b_a in [1, in.max_batch_per_microbatch] whose estimate is feasible for `shape`
// (its b_a ignored), by binary search as Algorithm 1's SIMULATE does; false when even b_a = 1 is
// infeasible. `estimates` counts the evaluations.
bool best_batch(const PlanInputs& in, PlanShape shape, Plan& out, std::int64_t* estimates = nullptr);

nlohmann::json plan_to_json(const Plan& plan);
nlohmann::json plan_inputs_to_json(const PlanInputs& in);

}  // namespace sy
