#include "engine/plan/live_plan.h"

#include <algorithm>

namespace sy {

LiveDeployment LiveDeployment::of(const Topology& t, const std::string& policy, std::int32_t microbatches,
                                  std::int32_t max_batch_per_rank) {
  LiveDeployment l;
  l.attention_devices = t.num_ranks();
  for (std::int32_t d = 0; d < t.num_devices; ++d) {
    const bool holds = !t.device_expert_ids[static_cast<std::size_t>(d)].empty();
    const bool attention = t.device_rank[static_cast<std::size_t>(d)] >= 0;
    if (holds && attention) l.colocated = true;
    if (holds && !attention) ++l.expert_devices;
  }
  l.policy = policy;
  l.microbatches = microbatches;
  l.max_batch_per_rank = max_batch_per_rank;
  return l;
}

nlohmann::json LiveDeployment::to_json() const {
  return {{"n_a", attention_devices}, {"n_e", expert_devices}, {"colocated", colocated}, {"policy", policy},
          {"m", microbatches}, {"max_batch_per_rank", max_batch_per_rank}};
}

std::string live_refusal(const LiveDeployment& live, const PlanShape& s) {
  std::string why;
  auto add = [&](const std::string& part) { why += (why.empty() ? "" : "; ") + part; };
  if (live.colocated)
    add("layout: the deployment colocates attention and experts; a plan needs disaggregated devices");
  if (s.n_a != live.attention_devices)
    add("n_a: " + std::to_string(s.n_a) + " attention devices, the deployment has " +
        std::to_string(live.attention_devices));
  if (s.n_e != live.expert_devices)
    add("n_e: " + std::to_string(s.n_e) + " expert devices, the deployment has " + std::to_string(live.expert_devices));
  // A running device is one GPU: tensor parallelism would regroup devices.
  if (s.tp_a != 1) add("tp_a: " + std::to_string(s.tp_a) + " GPUs per attention node, the deployment runs 1");
  if (s.tp_e != 1) add("tp_e: " + std::to_string(s.tp_e) + " GPUs per expert node, the deployment runs 1");
  if (!why.empty()) why += " (device counts and tensor parallelism cannot change live)";
  return why;
}

nlohmann::json live_plans(const PlanInputs& in, const LiveDeployment& live, std::int32_t top) {
  std::vector<Plan> plans;
  if (!live.colocated && live.expert_devices > 0) {
    // Every m for the devices the deployment has, each with its largest batch.
    for (std::int32_t m = 1; m <= in.max_microbatches; ++m) {
      Plan p;
      if (best_batch(in, {.tp_a = 1, .n_a = live.attention_devices, .tp_e = 1, .n_e = live.expert_devices, .m = m, .b_a = 1}, p))
        plans.push_back(std::move(p));
    }
    std::sort(plans.begin(), plans.end(),
              [](const Plan& a, const Plan& b) { return a.estimate.tokens_per_s > b.estimate.tokens_per_s; });
  }
  nlohmann::json out = nlohmann::json::array();
  auto emit = [&](const Plan& p) {
    nlohmann::json j = plan_to_json(p);
    const std::string why = live_refusal(live, p.shape);
    j["applicable"] = why.empty();
    if (!why.empty()) j["refused"] = why;
    out.push_back(std::move(j));
  };
  for (const Plan& p : plans) emit(p);
  for (const Plan& p : search_plans(in, top).plans)
    if (std::none_of(plans.begin(), plans.end(), [&](const Plan& q) { return q.shape == p.shape; })) emit(p);
  return out;
}

StatusOr<PlanShape> plan_shape_from_json(const nlohmann::json& plan) {
  if (!plan.is_object()) return Status::Error("'plan' must be an object with n_a, n_e, tp_a, tp_e, m and b_a");
  PlanShape s;
  const std::pair<const char*, std::int32_t*> fields[] = {{"n_a", &s.n_a}, {"n_e", &s.n_e}, {"tp_a", &s.tp_a},
                                                          {"tp_e", &s.tp_e}, {"m", &s.m},     {"b_a", &s.b_a}};
  for (const auto& [key, out] : fields) {
    if (!plan.contains(key)) return Status::Error(std::string("plan: missing '") + key + "'");
    const nlohmann::json& v = plan.at(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > 1'000'000)
      return Status::Error(std::string("plan: '") + key + "' must be an integer from 1 to 1000000, got " + v.dump());
    *out = v.get<std::int32_t>();
  }
  return s;
}

}  // namespace sy
