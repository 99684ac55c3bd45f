#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace sy::kernels {

std::int32_t argmax(const float* logits, std::int32_t vocab) {
  assert(vocab > 0);
  // torch.argmax treats NaN as larger than everything; the first maximum wins.
  std::int32_t best = 0;
  float best_value = logits[0];
  if (std::isnan(best_value)) return 0;
  for (std::int32_t i = 1; i < vocab; ++i) {
    const float v = logits[i];
    if (v > best_value) {
      best = i;
      best_value = v;
    } else if (std::isnan(v)) {
      return i;
    }
  }
  return best;
}

namespace {

using Candidate = std::pair<float, std::int32_t>;  // (logit, token)

// Descending logit, ties to the lower token: a strict total order, so every sort below has
// one possible result and sampling replays identically with any standard library.
bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// 53 random bits as a double in [0, 1): the same value from the same generator state on
// every platform (std::generate_canonical's algorithm is not pinned down across libraries).
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

std::vector<PenaltyTerm> penalty_terms(std::span<const std::int32_t> prompt, std::span<const std::int32_t> outputs,
                                       const Penalties& p) {
  std::vector<PenaltyTerm> terms;
  if (!p.any()) return terms;
  // (token, 1) per output and (token, 0) per prompt token, sorted: each token's run then sums
  // to its count.
  std::vector<std::pair<std::int32_t, std::int32_t>> all;
  all.reserve(outputs.size() + (p.repetition != 1.0f ? prompt.size() : 0));
  for (const std::int32_t t : outputs) all.emplace_back(t, 1);
  if (p.repetition != 1.0f)
    for (const std::int32_t t : prompt) all.emplace_back(t, 0);
  std::sort(all.begin(), all.end());
  for (const auto& [token, one] : all) {
    if (terms.empty() || terms.back().token != token) terms.push_back({token, 0});
    terms.back().count += one;
  }
  return terms;
}

void apply_token_mask(float* logits, std::int32_t vocab, std::span<const std::uint32_t> allowed) {
  for (std::int32_t t = 0; t < vocab; ++t) {
    const auto word = static_cast<std::size_t>(t) / 32;
    if (word >= allowed.size() || !(allowed[word] >> (static_cast<std::uint32_t>(t) % 32) & 1u))
      logits[t] = -std::numeric_limits<float>::infinity();
  }
}

void apply_logit_bias(float* logits, std::int32_t vocab, std::span<const TokenBias> biases) {
  for (const TokenBias& b : biases)
    if (b.token >= 0 && b.token < vocab) logits[b.token] += b.bias;
}

void apply_penalties(float* logits, std::int32_t vocab, std::span<const PenaltyTerm> terms, const Penalties& p) {
  for (const PenaltyTerm& term : terms) {
    if (term.token < 0 || term.token >= vocab) continue;
    float& l = logits[term.token];
    // Each quotient, product and difference rounded on its own, in vLLM's order and operations
    // (a positive logit divided, not multiplied by the reciprocal: they differ in the last bit):
    // the cuda kernel's too.
    if (p.repetition != 1.0f) l = l > 0.0f ? l / p.repetition : l * p.repetition;
    if (term.count > 0) {
      l -= p.frequency * static_cast<float>(term.count);
      l -= p.presence;
    }
  }
}

std::uint64_t position_seed(std::uint64_t seed, std::int64_t position) {
  // splitmix64 of the pair: nearby seeds and positions give unrelated generator states.
  std::uint64_t x = seed ^ (static_cast<std::uint64_t>(position) * 0x9e3779b97f4a7c15ull);
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

double sampling_uniform(std::uint64_t generator_seed) {
  std::mt19937_64 rng(generator_seed);
  return uniform01(rng);
}

Sampler::Sampler(SamplingParams params, std::uint64_t seed) : params_(params), rng_(seed) {}

std::int32_t Sampler::sample(const float* logits, std::int32_t vocab) {
  assert(vocab > 0);
  const float temperature = params_.temperature;
  if (!(temperature > 0.0f)) return argmax(logits, vocab);
  // One draw per call on every path, so the generator advances identically whatever the cuts.
  const double u = uniform01(rng_);
  const bool cut_k = params_.top_k > 0 && params_.top_k < vocab;
  const bool cut_p = params_.top_p < 1.0f;
  // A token is kept by min-p when its weight below (its probability over the most likely
  // one's) reaches min_p: the most likely token's weight is exactly 1, so one always is.
  const bool cut_min_p = params_.min_p > 0.0f;
  const double min_p = static_cast<double>(params_.min_p);

  float max_logit = -std::numeric_limits<float>::infinity();
  for (std::int32_t i = 0; i < vocab; ++i)
    if (logits[i] > max_logit) max_logit = logits[i];
  if (!(max_logit > -std::numeric_limits<float>::infinity())) return argmax(logits, vocab);
  // HF divides the logits by the temperature and takes a max-subtracted softmax of that.
  const float m = max_logit / temperature;
  auto weight = [&](float logit) { return static_cast<double>(std::exp(logit / temperature - m)); };

  scratch_.resize(static_cast<std::size_t>(vocab));
  if (!cut_k && !cut_p) {
    // Plain temperature sampling: inverse CDF in token order, no sort needed.
    double total = 0.0;
    for (std::int32_t i = 0; i < vocab; ++i) {
      float w = std::isnan(logits[i]) ? 0.0f : std::exp(logits[i] / temperature - m);
      if (cut_min_p && static_cast<double>(w) < min_p) w = 0.0f;
      scratch_[static_cast<std::size_t>(i)] = {w, i};
      total += static_cast<double>(w);
    }
    const double target = u * total;
    double acc = 0.0;
    std::int32_t last = 0;
    for (const auto& [w, i] : scratch_) {
      if (w <= 0.0f) continue;
      acc += static_cast<double>(w);
      last = i;
      if (target < acc) return i;
    }
    return last;  // rounding left target at the very top of the range
  }

  for (std::int32_t i = 0; i < vocab; ++i) {
    const float l = std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
    scratch_[static_cast<std::size_t>(i)] = {l, i};
  }
  const auto first = scratch_.begin();
  std::int64_t n = vocab;
  // Every sum below runs in an order fixed by the data alone (token order, or the strict
  // ranking), never in whatever order nth_element happened to leave.
  double kept_total = 0.0;
  if (cut_min_p) {
    // The kept tokens, in token order (stable), ahead of the rest: a prefix of the ranking.
    n = std::stable_partition(first, scratch_.end(),
                              [&](const Candidate& c) { return weight(c.first) >= min_p; }) - first;
  }
  if (cut_k) {
    // HF's top-k keeps the k best scores (TopKLogitsWarper); top-p then looks only at those.
    const std::int64_t k = std::min<std::int64_t>(params_.top_k, n);
    if (k < n) std::nth_element(first, first + k, first + n, ranks_before);
    n = k;
    std::sort(first, first + n, ranks_before);
  }
  for (std::int64_t i = 0; i < n; ++i) kept_total += weight(scratch_[static_cast<std::size_t>(i)].first);

  if (cut_p) {
    // Smallest prefix of the descending order whose probability reaches top_p (at least one
    // token). Sorting the whole vocabulary would cost V·log V per token, so without top-k
    // sort in growing slices and stop at the slice where the threshold is crossed.
    const double threshold = static_cast<double>(params_.top_p) * kept_total;
    double acc = 0.0;
    std::int64_t sorted = cut_k ? n : 0;
    std::int64_t scanned = 0;
    std::int64_t slice = 64;
    bool reached = false;
    while (scanned < n && !reached) {
      const std::int64_t end = std::max(sorted, std::min(n, scanned + slice));
      if (end > sorted) {
        if (end < n) std::nth_element(first + sorted, first + end, first + n, ranks_before);
        std::sort(first + sorted, first + end, ranks_before);
        sorted = end;
      }
      for (std::int64_t i = scanned; i < end; ++i) {
        acc += weight(scratch_[static_cast<std::size_t>(i)].first);
        if (acc >= threshold) {
          n = i + 1;
          reached = true;
          break;
        }
      }
      scanned = end;
      slice *= 4;
    }
    kept_total = acc;
  }

  const double target = u * kept_total;
  double acc = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    acc += weight(scratch_[static_cast<std::size_t>(i)].first);
    if (target < acc) return scratch_[static_cast<std::size_t>(i)].second;
  }
  return scratch_[static_cast<std::size_t>(n - 1)].second;
}

}  // namespace sy::kernels
