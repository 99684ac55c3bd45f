#include "kernels/cpu/router.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

namespace sy::kernels {

void router_topk(const float* logits, std::int64_t n_tokens, std::int32_t n_experts, std::int32_t k, bool renormalize,
                 std::int32_t* expert_ids, float* weights) {
  assert(k >= 1 && k <= n_experts);
  thread_local std::vector<float> probs;
  thread_local std::vector<char> taken;
  probs.resize(static_cast<std::size_t>(n_experts));
  taken.resize(static_cast<std::size_t>(n_experts));
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    const float* row = logits + t * n_experts;
    // F.softmax(logits, dim=-1, dtype=float32): max-subtracted exponentials over their sum.
    const float m = *std::max_element(row, row + n_experts);
    float sum = 0.0f;
    for (std::int32_t e = 0; e < n_experts; ++e) sum += (probs[static_cast<std::size_t>(e)] = std::exp(row[e] - m));
    for (float& p : probs) p /= sum;
    // k selection passes: k is small (2–8), and scanning in index order with a strict
    // comparison resolves ties to the lower expert id without a sort.
    std::fill(taken.begin(), taken.end(), char{0});
    std::int32_t* ids = expert_ids + t * k;
    float* w = weights + t * k;
    float total = 0.0f;
    for (std::int32_t i = 0; i < k; ++i) {
      std::int32_t best = -1;
      for (std::int32_t e = 0; e < n_experts; ++e) {
        if (taken[static_cast<std::size_t>(e)] != 0) continue;
        if (best < 0 || probs[static_cast<std::size_t>(e)] > probs[static_cast<std::size_t>(best)]) best = e;
      }
      taken[static_cast<std::size_t>(best)] = 1;
      ids[i] = best;
      w[i] = probs[static_cast<std::size_t>(best)];
      total += w[i];
    }
    if (renormalize)
      for (std::int32_t i = 0; i < k; ++i) w[i] /= total;
  }
}

}  // namespace sy::kernels
