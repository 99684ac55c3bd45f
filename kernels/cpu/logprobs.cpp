#include "kernels/cpu/logprobs.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace sy::kernels {

void token_logprobs(const float* logits, std::int32_t vocab, std::int32_t token, std::int32_t top,
                    TokenLogprobs& out) {
  assert(vocab > 0 && token >= 0 && token < vocab && top >= 0 && top <= kMaxTopLogprobs);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const auto at = [&](std::int32_t i) { return std::isnan(logits[i]) ? kNegInf : logits[i]; };
  float max_logit = kNegInf;
  for (std::int32_t i = 0; i < vocab; ++i) max_logit = std::max(max_logit, at(i));
  // log Σ exp(l - max) in double: a 150k-entry vocabulary loses digits in a float sum.
  double total = 0.0;
  if (max_logit > kNegInf)
    for (std::int32_t i = 0; i < vocab; ++i) total += std::exp(static_cast<double>(at(i)) - max_logit);
  const double log_z = max_logit > kNegInf ? static_cast<double>(max_logit) + std::log(total) : 0.0;
  const auto logprob = [&](std::int32_t i) {
    const float l = at(i);
    return l > kNegInf && max_logit > kNegInf ? static_cast<float>(static_cast<double>(l) - log_z) : kNegInf;
  };

  out.token = token;
  out.logprob = logprob(token);
  // Ties count against the token (vLLM's `logprobs >= token_logprob`); comparing logits is
  // comparing log-probabilities, one log_z apart.
  const float own = at(token);
  out.rank = 0;
  for (std::int32_t i = 0; i < vocab; ++i) out.rank += at(i) >= own ? 1 : 0;
  out.top.clear();
  if (top == 0) return;
  // A running list of the best `top`, kept sorted: a new logit enters only when it beats the
  // last, which after the first few thousand entries is rare.
  const auto better = [&](std::int32_t a, std::int32_t b) { return at(a) > at(b) || (at(a) == at(b) && a < b); };
  std::vector<std::int32_t> best;
  best.reserve(static_cast<std::size_t>(top) + 1);
  for (std::int32_t i = 0; i < vocab; ++i) {
    if (static_cast<std::int32_t>(best.size()) == top && !better(i, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
    if (static_cast<std::int32_t>(best.size()) > top) best.pop_back();
  }
  out.top.reserve(best.size());
  for (std::int32_t i : best) out.top.emplace_back(i, logprob(i));
}

}  // namespace sy::kernels
