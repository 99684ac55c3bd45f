// Checks a plan against the simulator: serves a saturating decode workload on the sim backend
// laid out as the plan says (n_a attention devices, n_e expert devices, ping-pong with m
// micro-batches of b_a sequences) and compares the measured throughput with the prediction.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/plan/plan_search.h"
#include "engine/serving/workload.h"

namespace sy {

struct PlanVerifyOptions {
  LengthClass length_class = LengthClass::Medium;  // the workload seq_len/kv_len were taken from
  double window_s = 3;   // cluster seconds measured once the batch is full
  std::uint64_t seed = 7;
};

struct PlanVerifyResult {
  double predicted_tokens_per_s = 0, simulated_tokens_per_s = 0;
  double predicted_latency_ms = 0, simulated_itl_ms = 0;  // per token: T_total vs mean ITL
  double error = 0;  // simulated / predicted − 1
  double simulated_s = 0, wall_s = 0;
};

// The plan's seq_len and kv_len for a workload length class: a decoding sequence holds its
// prompt and, on average, half its output (s); the KV manager reserves prompt + max new tokens.
void set_plan_lengths(PlanInputs& in, LengthClass length_class);

// One simulated run of `plan`. A simulated device stands for a tensor-parallel group (the
// roofline divides its kernels by tp, its link is tp NICs wide); attention and expert devices
// use their own profiles through SplitCostModel. Deviation: the simulator has one network
// bandwidth for every port, so it takes the slower side's (min(tp_a·W_a, tp_e·W_e)) where the
// model gives each side its own; the two only differ for heterogeneous or tp_a ≠ tp_e plans.
// Refused when the runtime cannot run the plan's policy (m above its micro-batch limit).
StatusOr<PlanVerifyResult> verify_plan(const PlanInputs& in, const Plan& plan, const PlanVerifyOptions& options);

}  // namespace sy
