// MegaScale-Infer's performance model of a disaggregated ping-pong deployment (§4.1–4.2):
// per-micro-batch attention, expert and communication times (Ta, Te, Tc, Eq. 6), the ping-pong
// constraints (1)–(3) and the minimum micro-batch count, iteration latency (Eqs. 4–5), the KV
// memory limit (Eq. 8), and throughput per dollar.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/sim/hardware_profile.h"

namespace sy {

// What a plan is searched for: the model, the two device profiles, the workload and limits.
struct PlanInputs {
  ModelConfig config;
  HardwareProfile attention_hw;  // attention nodes' GPUs
  HardwareProfile expert_hw;     // expert nodes' GPUs (the same profile when homogeneous)
  double seq_len = 175;          // s: average cached positions of a sequence while it decodes
  // Positions of KV each sequence holds for its whole life: Switchyard's KV manager reserves a
  // request's prompt + max new tokens when it admits it, so Eq. 8 counts these, not s.
  double kv_len = 250;
  double slo_ms = 0;             // per-token latency bound (Eq. 7); 0: none
  std::int32_t devices_per_node = 8;  // M_a = M_e: the largest tensor-parallel group
  std::int32_t max_microbatches = 4;  // N_m
  std::int32_t max_devices = 64;      // all GPUs of one plan
  std::int32_t max_batch_per_microbatch = 1024;  // upper end of the b_a search
  // Fraction of a GPU's memory that weights and KV may take (the simulator's KV sizing uses
  // the same 0.9, so a plan that fits here fits there).
  double memory_fraction = 0.9;
};

// One deployment: tp_a GPUs per attention node, n_a attention nodes (data parallel), tp_e GPUs
// per expert node, n_e expert nodes holding E/n_e experts each, m micro-batches of b_a
// sequences per attention node.
struct PlanShape {
  std::int32_t tp_a = 1, n_a = 1, tp_e = 1, n_e = 1, m = 1, b_a = 1;
  bool operator==(const PlanShape&) const = default;
};

// The model's prediction for a shape. Times in milliseconds, memory in GiB per GPU.
struct PlanEstimate {
  double t_a = 0, t_e = 0, t_c = 0, t_f = 0;  // one micro-batch through one layer
  double t_sample = 0;   // final norm + lm_head of one micro-batch (not in the paper; see t_total)
  double b_e = 0;        // sequences per expert per micro-batch: b_a·n_a·K/E
  std::int32_t m_min = 0;  // smallest m with m·Tf ≥ 2(Tf + Tc) (constraint 3)
  double t_iter_low = 0, t_iter_high = 0;  // Eq. 4
  double t_total = 0;    // Eq. 5 (+ the micro-batches' sampling): one decode step of the batch
  std::int64_t batch = 0;  // B = b_a·m·n_a sequences
  double tokens_per_s = 0;       // B / t_total
  double price = 0;              // tp_a·n_a·price_a + tp_e·n_e·price_e
  double tokens_per_s_per_price = 0;
  double attention_mem_gib = 0, expert_mem_gib = 0;  // per GPU: weights + KV (attention)
  double attention_cap_gib = 0, expert_cap_gib = 0;  // usable memory per GPU
  std::int32_t devices = 0;
  // Constraints this shape breaks, each "kind: reason" ("micro-batches: m=2 < minimum 3 (Tc/Tf
  // 0.41)"); kinds: shape, weights, memory, communication, micro-batches, slo. Empty: feasible.
  std::vector<std::string> violations;
  bool feasible() const { return violations.empty(); }
};

// Attention-side parameters per layer stack: attention projections, norms, routers, shared
// experts, dense MLPs, embeddings and lm_head (P_a).
double attention_parameters(const ModelConfig& c);
// Routed-expert parameters of one expert over all sparse layers (P_e).
double expert_parameters(const ModelConfig& c);

// Structural checks that do not depend on the batch: divisibility of E by n_e, tp limits,
// device count, weights fitting (Algorithm 1 line 4). Empty: fine.
std::vector<std::string> shape_violations(const PlanInputs& in, const PlanShape& shape);

PlanEstimate estimate_plan(const PlanInputs& in, const PlanShape& shape);

}  // namespace sy
