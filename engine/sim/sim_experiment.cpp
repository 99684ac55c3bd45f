#include "engine/sim/sim_experiment.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "engine/sim/sim_deployment.h"
#include "engine/util/thread_cpu_time.h"

namespace sy {

std::int32_t kv_pages_for_memory(const SimScenario& s, std::int32_t page_size) {
  const ModelConfig& c = s.config;
  const double H = c.hidden_size;
  const double q = static_cast<double>(c.num_heads) * c.head_dim, kv = static_cast<double>(c.num_kv_heads) * c.head_dim;
  // An attention rank holds every block's attention, the embeddings and lm_head, and whatever
  // experts the layout also puts on it (colocated); the largest such device sets the pages.
  const double attention_params = c.num_layers * (H * (2 * q + 2 * kv)) + 2.0 * c.vocab_size * H;
  const double I = c.moe_intermediate_size;
  const double expert_params_per_block = 3 * H * I;
  double most_experts = 0;
  for (std::int32_t d : s.layout.attention_devices()) {
    double n = 0;
    for (std::int32_t b = 0; b < c.num_layers; ++b) {
      if (!c.is_sparse(b)) continue;
      for (std::int32_t e = 0; e < c.num_experts; ++e) {
        const auto& holders = s.layout.placement.devices(b, e);
        if (std::find(holders.begin(), holders.end(), d) != holders.end()) n += 1;
      }
    }
    most_experts = std::max(most_experts, n);
  }
  const double weights_bytes = 2 * (attention_params + most_experts * expert_params_per_block);
  const double free_bytes = s.hardware.memory_gib * 1073741824.0 * 0.9 - weights_bytes;
  const double per_position = 2.0 * kv * 2 * c.num_layers;  // K and V, bf16, every block
  const double pages = free_bytes / (per_position * page_size);
  return static_cast<std::int32_t>(std::clamp(pages, 0.0, 1e9));
}

SimPoint run_sim_point(const SimScenario& s, double rate, double duration_s, double warmup_s) {
  WorkloadSpec w;
  w.length_class = s.length_class;
  w.rate_per_s = rate;
  w.duration_s = duration_s;
  w.seed = s.seed;
  w.vocab_size = s.config.vocab_size;

  DeploymentOptions o;
  o.policy = s.policy;
  o.skew_lambda = s.skew_lambda;
  o.skew_seed = s.seed;
  o.page_size = 16;
  o.kv_pages_per_rank = kv_pages_for_memory(s, o.page_size);
  o.coordinator.max_batch_per_rank = s.max_batch_per_rank;
  o.coordinator.skip_prefill = s.decode_only;
  o.link = profile_links(s.hardware, s.devices_per_node);
  SimDeployment d(s.config, s.hardware, Topology::from_layout(s.layout, s.config), o);
  d.submit(generate_workload(w));

  const std::int64_t end = static_cast<std::int64_t>(duration_s * 1e9);
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = thread_cpu_seconds();
  d.loop().run([&] { return d.loop().now() >= end; });
  d.cluster().flush_stalls();
  SimPoint p;
  p.rate = rate;
  p.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  p.cpu_s = thread_cpu_seconds() - cpu0;
  p.simulated_s = static_cast<double>(d.loop().now()) * 1e-9;
  p.report = d.metrics().report(static_cast<std::int64_t>(warmup_s * 1e9), d.loop().now());
  return p;
}

SimPoint max_sustained_throughput(const SimScenario& s, double itl_target_ms, double start_rate, double step,
                                  double duration_s, double warmup_s, std::int32_t max_points,
                                  const std::function<void(const SimPoint&)>& on_point) {
  SimPoint best;
  double rate = start_rate;
  for (std::int32_t i = 0; i < max_points; ++i, rate *= step) {
    SimPoint p = run_sim_point(s, rate, duration_s, warmup_s);
    if (on_point) on_point(p);
    const bool within = p.report.itl.count > 0 && p.report.itl.mean_ms <= itl_target_ms;
    if (!within) break;
    const bool growing = p.report.tokens_per_s > best.report.tokens_per_s * 1.02;
    if (p.report.tokens_per_s > best.report.tokens_per_s) best = p;
    if (!growing) break;
  }
  return best;
}

}  // namespace sy
