// One simulated serving experiment — a model shape on a cluster of one device profile under
// one policy and workload — and the searches the paper reproductions need on top of it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/model/model_config.h"
#include "engine/runtime/layout.h"
#include "engine/runtime/runtime_policy.h"
#include "engine/serving/metrics.h"
#include "engine/serving/workload.h"
#include "engine/sim/hardware_profile.h"

namespace sy {

struct SimScenario {
  ModelConfig config;
  HardwareProfile hardware;
  Layout layout;
  RuntimePolicy policy;
  LengthClass length_class = LengthClass::Medium;
  double skew_lambda = 0;         // expert popularity ∝ exp(−λ·rank)
  std::int32_t devices_per_node = 8;
  std::int32_t max_batch_per_rank = 256;
  std::uint64_t seed = 0;
  bool decode_only = true;  // prompts arrive already cached, as both papers measure
};

struct SimPoint {
  double rate = 0;              // offered requests/s
  MetricsReport report;         // the steady-state window
  double simulated_s = 0;
  double wall_s = 0;
  double cpu_s = 0;             // CPU time of the thread that ran it (studies run points in parallel)
};

// Serves Poisson arrivals at `rate` for `duration_s` of cluster time and reports the window
// [warmup_s, duration_s] (the first seconds fill the batches and are not steady state).
// Deterministic by the scenario's seed, and free of shared mutable state: points may run on
// several threads at once (reproduce --jobs) with results identical to one after another.
SimPoint run_sim_point(const SimScenario& s, double rate, double duration_s, double warmup_s);

// The highest throughput the scenario sustains with mean inter-token latency within
// itl_target_ms: rates from `start_rate` up by `step` until the latency target is missed or the
// throughput stops growing (< 2 %). Returns the best point.
// on_point sees every point run (for accounting).
SimPoint max_sustained_throughput(const SimScenario& s, double itl_target_ms, double start_rate, double step,
                                  double duration_s, double warmup_s, std::int32_t max_points = 12,
                                  const std::function<void(const SimPoint&)>& on_point = {});

// KV pages an attention device of `layout` holds: what of the device's memory the weights it
// hosts leave, at 90 % usable, in pages of `page_size` bf16 positions.
std::int32_t kv_pages_for_memory(const SimScenario& s, std::int32_t page_size);

}  // namespace sy
