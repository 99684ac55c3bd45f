#include "engine/plan/plan_verify.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/plan/split_cost_model.h"
#include "engine/runtime/layout.h"
#include "engine/runtime/runtime_policy.h"
#include "engine/sim/sim_deployment.h"

namespace sy {

void set_plan_lengths(PlanInputs& in, LengthClass length_class) {
  const LengthRange r = length_range(length_class);
  const double input = (r.input_min + r.input_max) / 2.0, output = (r.output_min + r.output_max) / 2.0;
  in.seq_len = input + output / 2;
  in.kv_len = input + output;
}

StatusOr<PlanVerifyResult> verify_plan(const PlanInputs& in, const Plan& plan, const PlanVerifyOptions& options) {
  const ModelConfig& c = in.config;
  const PlanShape& s = plan.shape;
  const PlanEstimate& e = plan.estimate;
  PlanVerifyResult r;
  r.predicted_tokens_per_s = e.tokens_per_s;
  r.predicted_latency_ms = e.t_total;

  Layout layout = make_disaggregated_layout(s.n_a, s.n_e, c, 1);
  PolicySpec spec;
  spec.policy = "pingpong";
  spec.microbatches = s.m;
  layout.policy = spec;

  StatusOr<RuntimePolicy> policy = runtime_policy(spec);
  if (!policy.ok()) return policy.status();
  DeploymentOptions o;
  o.policy = *policy;
  o.cost_model = std::make_shared<SplitCostModel>(c, in.attention_hw, s.tp_a, in.expert_hw, s.tp_e);
  o.skew_lambda = 0;  // the model assumes uniform routing (b_e = b_a·n_a·K/E)
  o.skew_seed = options.seed;
  o.page_size = 16;
  // The KV pages Eq. 8's accounting leaves an attention node: usable memory less the weights.
  const double kv_dim = static_cast<double>(c.num_kv_heads) * c.head_dim;
  const double free_bytes =
      e.attention_cap_gib * s.tp_a * 1073741824.0 - 2.0 * attention_parameters(c);
  o.kv_pages_per_rank = static_cast<std::int32_t>(
      std::clamp(free_bytes / (2.0 * 2.0 * kv_dim * c.num_layers * o.page_size), 0.0, 1e9));
  o.coordinator.max_batch_per_rank = s.b_a * s.m;
  o.coordinator.skip_prefill = true;  // decode only, as the paper's plan search is
  // Attention and expert nodes are separate machines: every transfer crosses the network.
  LinkModel link;
  link.devices_per_node = 1;
  link.inter_node_bytes_per_ns =
      std::min(in.attention_hw.nic_gbps * s.tp_a, in.expert_hw.nic_gbps * s.tp_e);
  link.inter_node_latency_ns = static_cast<std::int64_t>(
      std::max(in.attention_hw.nic_latency_us, in.expert_hw.nic_latency_us) * 1e3);
  link.bytes_per_ns = link.inter_node_bytes_per_ns;
  link.latency_ns = link.inter_node_latency_ns;
  link.shared_ports = true;
  o.link = link;

  // Arrivals four times what the batch serves fill it within a quarter of a request's life;
  // the window starts once it is full and the first requests have begun to finish.
  const LengthRange lr = length_range(options.length_class);
  const double output = (lr.output_min + lr.output_max) / 2.0;
  const double life_s = output * e.t_total * 1e-3;
  const double rate = 4.0 * static_cast<double>(e.batch) / std::max(life_s, 1e-6);
  const double warmup_s = 0.25 * life_s + 0.5 * life_s;
  const double duration_s = warmup_s + std::max(options.window_s, 20 * e.t_total * 1e-3);

  WorkloadSpec w;
  w.length_class = options.length_class;
  w.rate_per_s = rate;
  w.duration_s = duration_s;
  w.seed = options.seed;
  w.vocab_size = c.vocab_size;

  SimDeployment d(c, in.attention_hw, Topology::from_layout(layout, c), o);
  d.submit(generate_workload(w));
  const auto end = static_cast<std::int64_t>(duration_s * 1e9);
  const auto t0 = std::chrono::steady_clock::now();
  d.loop().run([&] { return d.loop().now() >= end; });
  d.cluster().flush_stalls();
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.simulated_s = static_cast<double>(d.loop().now()) * 1e-9;
  const MetricsReport m = d.metrics().report(static_cast<std::int64_t>(warmup_s * 1e9), d.loop().now());
  r.simulated_tokens_per_s = m.tokens_per_s;
  r.simulated_itl_ms = m.itl.mean_ms;
  r.error = r.predicted_tokens_per_s > 0 ? r.simulated_tokens_per_s / r.predicted_tokens_per_s - 1 : 0;
  return r;
}

}  // namespace sy
