// FinDEP's performance model and configuration solver (FinDEP §3–4): the α + β·x cost of each
// task of disaggregated expert parallelism, the makespan of a fine-grained schedule
// (r1 attention micro-batches of m_a samples, r2 expert chunks of m_e tokens per expert,
// ASAS or AASS order), and Algorithm 1, which picks the configuration.
#pragma once

#include <cstdint>
#include <string>

namespace sy {

// t(x) = α + β·x (FinDEP Eqs. 7–9). Times in microseconds.
struct LinearCost {
  double alpha_us = 0;
  double beta_us = 0;  // per unit of x
  double at(double x) const { return alpha_us + beta_us * x; }
  bool operator==(const LinearCost&) const = default;
};

// The primitive models the micro-benchmarks fit (FinDEP §4.1, §5.2): GEMM time per FLOP
// (x = m·k·n), attention time per unit of N_h·B·S²·(D_k + D_v), and A2E/E2A time per byte.
struct FindepPrimitives {
  LinearCost gemm;       // t_gm(x), x = m·k·n
  LinearCost attention;  // t_attn(y), y = N_h·B·S²·(D_k + D_v)
  LinearCost comm;       // t_c(z), z = bytes one attention GPU sends to the expert group
  bool operator==(const FindepPrimitives&) const = default;
};

// The model dimensions FinDEP's formulation uses (Table 1 and §3.1).
struct FindepModelDims {
  std::int64_t hidden = 0;         // M, embedding size
  std::int64_t expert_hidden = 0;  // H, FFN hidden size of one expert (the shared one too)
  std::int64_t heads = 0;          // n_h
  std::int64_t head_dim_k = 0;     // d_k
  std::int64_t head_dim_v = 0;     // d_v
  std::int64_t shared_experts = 0; // N_shared, 0 without shared experts (Qwen3-MoE)
  std::int64_t experts = 0;        // E
  std::int64_t top_k = 0;
  std::int64_t layers = 0;         // T
  double bytes_per_element = 2;    // activations on the wire (bf16)
  std::int64_t shared_hidden = 0;  // FFN hidden of one shared expert where it differs from H (qwen2_moe); 0: H
};

// The four task models in terms of the schedule's variables (FinDEP §4.1, after Eq. 11):
// t_a(m_a), t_s(m_a) per attention micro-batch; t_e(m_e), t_a2e(m_e) = t_e2a(m_e) per chunk.
struct FindepTaskCosts {
  LinearCost attention;  // t_a(m_a)
  LinearCost shared;     // t_s(m_a); zero without shared experts
  LinearCost expert;     // t_e(m_e)
  LinearCost a2e;        // t_a2e(m_e), also E2A
};

// Eqs. 1–4 and 10–11 for sequence length S on `eg` expert GPUs. Deviation: the paper's text
// drops Eq. 3's factor 3 (three projections) from α_e and β_e; we keep it. `context`: the
// positions each of a sample's S query tokens attends to, S in the paper's prefill (the S² of
// y); a decode step is S = 1 query token attending to its cached context, y = N_h·B·S·C·(D_k + D_v).
FindepTaskCosts findep_task_costs(const FindepPrimitives& p, const FindepModelDims& d, std::int64_t seq_len,
                                  std::int64_t eg);
FindepTaskCosts findep_task_costs(const FindepPrimitives& p, const FindepModelDims& d, std::int64_t seq_len,
                                  std::int64_t eg, double context);

enum class FindepOrder : std::uint8_t {
  Asas,  // attention and shared expert alternate per micro-batch
  Aass,  // every attention micro-batch of the layer, then every shared-expert one
};
std::string order_name(FindepOrder order);

// One point of the search space. m_e follows from the rest (FinDEP Eq. 5, last rule):
// m_e · r2 · E = m_a · ag · top_k · S.
struct FindepConfig {
  std::int64_t ma = 1;  // samples per attention micro-batch per AG GPU
  std::int32_t r1 = 1;  // attention micro-batches (pipeline degree of the AG)
  std::int32_t r2 = 1;  // expert chunks per micro-batch (fine-grained degree of the EG)
  FindepOrder order = FindepOrder::Asas;
  double me = 0;        // tokens per expert per chunk
  bool operator==(const FindepConfig&) const = default;
};

// What a schedule is evaluated on: ag attention GPUs, eg expert GPUs, sequences of S tokens.
struct FindepProblem {
  FindepTaskCosts costs;
  std::int64_t ag = 1;
  std::int64_t experts = 1;  // E
  std::int64_t top_k = 1;
  std::int64_t seq_len = 1;  // S
  std::int64_t layers = 1;   // T
  std::int64_t max_samples = 1;  // memory bound on r1 · m_a per AG GPU (getMaxR1)
  std::int32_t max_r2 = 64;
  // PPPipe (MegaScale-Infer) as FinDEP sees it (§2.3, Fig. 3b): the shared expert is part of
  // the attention task, so A2E waits for both; r2 = 1.
  bool shared_inside_attention = false;
};

double findep_me(const FindepProblem& p, std::int64_t ma, std::int32_t r2);

// The makespan (µs) of T layers under the constraints of FinDEP Eq. 5 with every task started
// as early as its dependencies and its resource (AG, A2E link, EG, E2A link) allow, the AG
// running its tasks in `order` and the other resources in (layer, micro-batch, chunk) order.
// Deviation: FinDEP evaluates the closed form of Eq. 13, derived for ASAS; simulating the
// constraints gives the exact makespan of the same schedule for both orders.
double findep_makespan_us(const FindepProblem& p, const FindepConfig& c);
// Tokens per second of the whole AG: r1 · m_a · ag · S per makespan (Eq. 6).
double findep_throughput(const FindepProblem& p, const FindepConfig& c);

struct FindepSolution {
  FindepConfig config;
  double throughput = 0;   // tokens/s
  std::int64_t evaluated = 0;  // schedules evaluated
};

// FinDEP Algorithm 1: m_a from its largest value down, r1 the largest the memory allows
// (skipping m_a that give the same r1), both orders, and r2 by a search over the objective's
// convexity in 1/r2 (Theorem 4). Polynomial: O(d(B) · log(max_r2)) schedules.
FindepSolution solve_findep(const FindepProblem& p);
// Every (m_a, r1 with r1·m_a ≤ max_samples, r2, order): what the solver is checked against.
FindepSolution brute_force_findep(const FindepProblem& p);
// The best PPPipe configuration (shared expert inside attention, r2 = 1) over (m_a, r1).
FindepSolution best_pppipe(FindepProblem p);

}  // namespace sy
