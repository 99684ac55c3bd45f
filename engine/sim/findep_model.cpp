#include "engine/sim/findep_model.h"

#include <algorithm>
#include <vector>

namespace sy {

FindepTaskCosts findep_task_costs(const FindepPrimitives& p, const FindepModelDims& d, std::int64_t seq_len,
                                  std::int64_t eg) {
  return findep_task_costs(p, d, seq_len, eg, static_cast<double>(seq_len));
}

FindepTaskCosts findep_task_costs(const FindepPrimitives& p, const FindepModelDims& d, std::int64_t seq_len,
                                  std::int64_t eg, double context) {
  const double S = static_cast<double>(seq_len), M = static_cast<double>(d.hidden);
  const double H = static_cast<double>(d.expert_hidden), nh = static_cast<double>(d.heads);
  const double dk = static_cast<double>(d.head_dim_k), dv = static_cast<double>(d.head_dim_v);
  const double shared = static_cast<double>(d.shared_experts);
  const double local_experts = static_cast<double>(d.experts) / static_cast<double>(std::max<std::int64_t>(1, eg));
  FindepTaskCosts c;
  // Eqs. 10–11: four projections and the attention core per sample of S tokens.
  c.attention.alpha_us = 4 * p.gemm.alpha_us + p.attention.alpha_us;
  c.attention.beta_us = p.gemm.beta_us * (2 * S * M * nh * dk + 2 * S * M * nh * dv) +
                        p.attention.beta_us * S * context * nh * (dk + dv);
  // Eq. 2: three projections per shared expert.
  const double Hs = d.shared_hidden > 0 ? static_cast<double>(d.shared_hidden) : H;
  c.shared.alpha_us = 3 * shared * p.gemm.alpha_us;
  c.shared.beta_us = 3 * shared * p.gemm.beta_us * S * M * Hs;
  // Eq. 3: three projections for each of the E/eg local experts, m_e tokens each.
  c.expert.alpha_us = 3 * local_experts * p.gemm.alpha_us;
  c.expert.beta_us = 3 * local_experts * p.gemm.beta_us * M * H;
  // Eq. 4: E/eg · m_e · M elements.
  c.a2e.alpha_us = p.comm.alpha_us;
  c.a2e.beta_us = p.comm.beta_us * local_experts * M * d.bytes_per_element;
  return c;
}

std::string order_name(FindepOrder order) { return order == FindepOrder::Asas ? "ASAS" : "AASS"; }

double findep_me(const FindepProblem& p, std::int64_t ma, std::int32_t r2) {
  return static_cast<double>(ma) * static_cast<double>(p.ag) * static_cast<double>(p.top_k) *
         static_cast<double>(p.seq_len) / (static_cast<double>(r2) * static_cast<double>(p.experts));
}

double findep_makespan_us(const FindepProblem& p, const FindepConfig& c) {
  const double ma = static_cast<double>(c.ma);
  double ta = p.costs.attention.at(ma);
  double ts = p.costs.shared.alpha_us == 0 && p.costs.shared.beta_us == 0 ? 0 : p.costs.shared.at(ma);
  if (p.shared_inside_attention) ta += ts, ts = 0;
  const double me = findep_me(p, c.ma, c.r2);
  const double te = p.costs.expert.at(me), tc = p.costs.a2e.at(me);

  const auto r1 = static_cast<std::size_t>(c.r1);
  std::vector<double> ready(r1, 0.0);  // when micro-batch i's next attention may start
  std::vector<double> attn_done(r1), shared_done(r1);
  double ag = 0, a2e = 0, eg = 0, e2a = 0;  // when each resource is next free
  for (std::int64_t t = 0; t < p.layers; ++t) {
    // AG: the order decides where each micro-batch's shared expert goes (rules 1–2, 6).
    const auto attention = [&](std::size_t i) {
      ag = std::max(ag, ready[i]) + ta;
      attn_done[i] = ag;
      shared_done[i] = ag;
    };
    const auto shared = [&](std::size_t i) {
      if (ts == 0) return;
      ag = std::max(ag, attn_done[i]) + ts;
      shared_done[i] = ag;
    };
    if (c.order == FindepOrder::Asas) {
      for (std::size_t i = 0; i < r1; ++i) attention(i), shared(i);
    } else {
      for (std::size_t i = 0; i < r1; ++i) attention(i);
      for (std::size_t i = 0; i < r1; ++i) shared(i);
    }
    // A2E link, EG, E2A link: r2 chunks per micro-batch, each waiting on the one before it
    // (rules 3–5, 7–8); the next layer's attention waits for every chunk and the shared expert
    // (rule 9).
    for (std::size_t i = 0; i < r1; ++i) {
      double back = 0;
      for (std::int32_t j = 0; j < c.r2; ++j) {
        a2e = std::max(a2e, attn_done[i]) + tc;
        eg = std::max(eg, a2e) + te;
        e2a = std::max(e2a, eg) + tc;
        back = e2a;
      }
      ready[i] = std::max(back, shared_done[i]);
    }
  }
  return *std::max_element(ready.begin(), ready.end());
}

double findep_throughput(const FindepProblem& p, const FindepConfig& c) {
  const double tokens = static_cast<double>(c.r1) * static_cast<double>(c.ma) * static_cast<double>(p.ag) *
                        static_cast<double>(p.seq_len);
  return tokens / (findep_makespan_us(p, c) * 1e-6);
}

namespace {

// r2 may not cut a chunk below one token per expert.
std::int32_t r2_limit(const FindepProblem& p, std::int64_t ma) {
  const double whole = findep_me(p, ma, 1);
  return std::max<std::int32_t>(1, std::min<std::int32_t>(p.max_r2, static_cast<std::int32_t>(whole)));
}

struct Scored {
  FindepConfig config;
  double throughput = 0;
};

Scored score(const FindepProblem& p, std::int64_t ma, std::int32_t r1, std::int32_t r2, FindepOrder order,
             std::int64_t& evaluated) {
  ++evaluated;
  FindepConfig c{ma, r1, r2, order, findep_me(p, ma, r2)};
  return {c, findep_throughput(p, c)};
}

void keep_best(FindepSolution& best, const Scored& s) {
  if (s.throughput > best.throughput) {
    best.throughput = s.throughput;
    best.config = s.config;
  }
}

}  // namespace

FindepSolution solve_findep(const FindepProblem& p) {
  FindepSolution best;
  std::int32_t previous_r1 = 0;
  for (std::int64_t ma = p.max_samples; ma >= 1; --ma) {
    // getMaxR1: the most micro-batches of m_a samples the AG's memory holds.
    const auto r1 = static_cast<std::int32_t>(std::min<std::int64_t>(p.max_samples / ma, 64));
    if (r1 == 0 || r1 == previous_r1) continue;  // not on the (m_a, r1) Pareto frontier
    previous_r1 = r1;
    for (FindepOrder order : {FindepOrder::Asas, FindepOrder::Aass}) {
      // Theorem 4: the makespan is convex in 1/r2, hence unimodal over the integers r2;
      // a ternary search finds its minimum, and the last few candidates are compared directly.
      std::int32_t lo = 1, hi = r2_limit(p, ma);
      while (hi - lo > 2) {
        const std::int32_t m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;
        const double f1 = score(p, ma, r1, m1, order, best.evaluated).throughput;
        const double f2 = score(p, ma, r1, m2, order, best.evaluated).throughput;
        if (f1 < f2) {
          lo = m1 + 1;
        } else if (f1 > f2) {
          hi = m2 - 1;
        } else {
          lo = m1, hi = m2;
          if (m1 + 1 >= m2) break;
        }
      }
      for (std::int32_t r2 = lo; r2 <= hi; ++r2) keep_best(best, score(p, ma, r1, r2, order, best.evaluated));
    }
  }
  return best;
}

FindepSolution brute_force_findep(const FindepProblem& p) {
  FindepSolution best;
  for (std::int64_t ma = 1; ma <= p.max_samples; ++ma)
    for (std::int32_t r1 = 1; r1 <= std::min<std::int64_t>(p.max_samples / ma, 64); ++r1)
      for (std::int32_t r2 = 1; r2 <= r2_limit(p, ma); ++r2)
        for (FindepOrder order : {FindepOrder::Asas, FindepOrder::Aass})
          keep_best(best, score(p, ma, r1, r2, order, best.evaluated));
  return best;
}

FindepSolution best_pppipe(FindepProblem p) {
  p.shared_inside_attention = true;
  p.max_r2 = 1;
  FindepSolution best;
  for (std::int64_t ma = 1; ma <= p.max_samples; ++ma)
    for (std::int32_t r1 = 1; r1 <= std::min<std::int64_t>(p.max_samples / ma, 64); ++r1)
      keep_best(best, score(p, ma, r1, 1, FindepOrder::Asas, best.evaluated));
  return best;
}

}  // namespace sy
