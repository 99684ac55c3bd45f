#include "engine/plan/plan_search.h"

#include <algorithm>

namespace sy {
namespace {

std::string kind_of(const std::string& violation) { return violation.substr(0, violation.find(':')); }

}  // namespace

bool best_batch(const PlanInputs& in, PlanShape shape, Plan& out, std::int64_t* estimates) {
  auto eval = [&](std::int32_t b) {
    shape.b_a = b;
    if (estimates) ++*estimates;
    return estimate_plan(in, shape);
  };
  PlanEstimate lo_est = eval(1);
  if (!lo_est.feasible()) {
    out.shape = shape;
    out.estimate = std::move(lo_est);
    out.binding = out.estimate.violations.front();
    return false;
  }
  // Every constraint tightens as b_a grows (latency, KV memory, and Tc/Tf: communication grows
  // linearly while expert time starts flat, bound by streaming the weights), so feasibility is
  // monotone and a binary search finds the edge.
  std::int32_t lo = 1, hi = in.max_batch_per_microbatch + 1;  // lo feasible, hi infeasible or past the end
  while (hi - lo > 1) {
    const std::int32_t mid = lo + (hi - lo) / 2;
    PlanEstimate e = eval(mid);
    if (e.feasible()) {
      lo = mid;
      lo_est = std::move(e);
    } else {
      hi = mid;
    }
  }
  out.shape = shape;
  out.shape.b_a = lo;
  out.estimate = std::move(lo_est);
  if (hi > in.max_batch_per_microbatch) {
    out.binding = "batch limit: b_a = " + std::to_string(in.max_batch_per_microbatch);
  } else {
    out.binding = eval(hi).violations.front();
  }
  return true;
}

PlanSearchResult search_plans(const PlanInputs& in, std::int32_t top) {
  PlanSearchResult result;
  const std::int32_t E = in.config.num_experts;
  std::vector<Plan> all;
  // Algorithm 1 lines 2–3: tp sizes within a node, powers of two as clusters run them.
  for (std::int32_t tp_e = 1; tp_e <= in.devices_per_node; tp_e *= 2) {
    for (std::int32_t tp_a = 1; tp_a <= in.devices_per_node; tp_a *= 2) {
      // Deviation: the paper gives each expert its own node (n_e = E). On a small model that is
      // more GPUs than the experts need, and Switchyard's expert devices hold any number of
      // experts, so every divisor of E is a candidate (n_e = E among them).
      for (std::int32_t n_e = 1; n_e <= E; ++n_e) {
        if (E % n_e != 0) continue;
        // Deviation: BALANCE sets n_a = k1·E/(k3·K) from linear fits Ta = k1·b_a + k2,
        // Te = k3·b_e + k4. The roofline is not linear (a small expert batch is bound by
        // streaming the weights: k3 ≈ 0 and n_a would grow without end), so every n_a the device
        // limit allows is tried; the search stays O(M²·Nm·n_a·log B) evaluations, milliseconds.
        const std::int32_t room = in.max_devices - tp_e * n_e;
        for (std::int32_t n_a = 1; n_a * tp_a <= room; ++n_a) {
          PlanShape shape{tp_a, n_a, tp_e, n_e, 1, 1};
          if (!shape_violations(in, shape).empty()) {
            ++result.shapes;
            ++result.rejected[kind_of(shape_violations(in, shape).front())];
            continue;
          }
          // Algorithm 1 line 6 starts at m = 3 (its clusters' minimum); every m from 1 is
          // tried and constraint 3 rejects those below the minimum the times give.
          for (std::int32_t m = 1; m <= in.max_microbatches; ++m) {
            shape.m = m;
            ++result.shapes;
            Plan p;
            if (best_batch(in, shape, p, &result.estimates)) {
              all.push_back(std::move(p));
            } else {
              ++result.rejected[kind_of(p.binding)];
            }
          }
        }
      }
    }
  }
  std::sort(all.begin(), all.end(), [](const Plan& a, const Plan& b) {
    if (a.estimate.tokens_per_s_per_price != b.estimate.tokens_per_s_per_price)
      return a.estimate.tokens_per_s_per_price > b.estimate.tokens_per_s_per_price;
    return a.estimate.tokens_per_s > b.estimate.tokens_per_s;
  });
  if (top >= 0 && all.size() > static_cast<std::size_t>(top)) all.resize(static_cast<std::size_t>(top));
  result.plans = std::move(all);
  return result;
}

nlohmann::json plan_to_json(const Plan& p) {
  const PlanShape& s = p.shape;
  const PlanEstimate& e = p.estimate;
  return {{"tp_a", s.tp_a},
          {"n_a", s.n_a},
          {"tp_e", s.tp_e},
          {"n_e", s.n_e},
          {"m", s.m},
          {"b_a", s.b_a},
          {"batch", e.batch},
          {"devices", e.devices},
          {"t_a_ms", e.t_a},
          {"t_e_ms", e.t_e},
          {"t_c_ms", e.t_c},
          {"m_min", e.m_min},
          {"token_latency_ms", e.t_total},
          {"t_iter_ms", {e.t_iter_low, e.t_iter_high}},
          {"tokens_per_s", e.tokens_per_s},
          {"price", e.price},
          {"tokens_per_s_per_price", e.tokens_per_s_per_price},
          {"attention_mem_gib", e.attention_mem_gib},
          {"expert_mem_gib", e.expert_mem_gib},
          {"binding", p.binding}};
}

nlohmann::json plan_inputs_to_json(const PlanInputs& in) {
  return {{"attention_hardware", in.attention_hw.name},
          {"expert_hardware", in.expert_hw.name},
          {"seq_len", in.seq_len},
          {"kv_len", in.kv_len},
          {"slo_ms", in.slo_ms},
          {"devices_per_node", in.devices_per_node},
          {"max_microbatches", in.max_microbatches},
          {"max_devices", in.max_devices}};
}

}  // namespace sy
