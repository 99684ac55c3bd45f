#include "kernels/cuda/penalty_entries.h"

#include <algorithm>
#include <cassert>

namespace sy::kernels {

void append_penalty_entries(std::vector<PenaltyEntry>& out, std::int32_t row, std::int32_t vocab,
                            std::span<const PenaltyTerm> terms, std::span<const TokenBias> biases, const Penalties& p) {
  // Each token once: the kernel gives each entry a thread, so a repeated token would race.
  assert(std::adjacent_find(biases.begin(), biases.end(), [](const TokenBias& a, const TokenBias& b) {
           return a.token >= b.token;
         }) == biases.end());
  const std::size_t first = out.size();
  for (const PenaltyTerm& t : terms)
    out.push_back({row, t.token, static_cast<float>(t.count), p.presence, p.frequency, p.repetition, 0.0f});
  const std::size_t with_terms = out.size();
  for (const TokenBias& b : biases) {
    // A token with terms takes its bias in its entry; one without gets an entry that only adds
    // it (count 0: no frequency or presence term; repetition 1: it is in neither list).
    const auto terms_end = out.begin() + static_cast<std::ptrdiff_t>(with_terms);
    const auto hit = std::lower_bound(out.begin() + static_cast<std::ptrdiff_t>(first), terms_end, b.token,
                                      [](const PenaltyEntry& e, std::int32_t token) { return e.token < token; });
    if (hit != terms_end && hit->token == b.token) hit->bias = b.bias;
    else out.push_back({row, b.token, 0.0f, 0.0f, 0.0f, 1.0f, b.bias});
  }
  std::size_t kept = first;
  for (std::size_t i = first; i < out.size(); ++i)
    if (out[i].token >= 0 && out[i].token < vocab) out[kept++] = out[i];
  out.resize(kept);
}

}  // namespace sy::kernels
