// Token sampling from logits: greedy, or temperature with min-p / top-k / top-p and a seeded
// generator; OpenAI's presence and frequency penalties and vLLM's repetition penalty on the
// logits before either.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace sy::kernels {

struct SamplingParams {
  float temperature = 0.0f;  // 0 means greedy
  float top_p = 1.0f;        // nucleus: smallest set whose probability reaches top_p
  std::int32_t top_k = 0;    // 0 means no top-k cut
  // vLLM's min-p: keep the tokens whose probability is at least min_p times the most likely
  // one's (after temperature, before top-k and top-p, as vLLM's v1 sampler orders them).
  float min_p = 0.0f;
};

// OpenAI's presence and frequency penalties and vLLM's repetition penalty, which vLLM applies
// to the logits before the temperature (so greedy decoding too).
struct Penalties {
  float presence = 0.0f;
  float frequency = 0.0f;
  float repetition = 1.0f;  // > 0; 1: off
  bool any() const { return presence != 0.0f || frequency != 0.0f || repetition != 1.0f; }
};

// OpenAI's logit_bias: `bias` added to the token's logit before the penalties (vLLM's order).
struct TokenBias {
  std::int32_t token = 0;
  float bias = 0.0f;
  bool operator==(const TokenBias&) const = default;
};

// logits[t] += bias for each entry (a token outside [0, vocab) skipped, as apply_penalties does).
void apply_logit_bias(float* logits, std::int32_t vocab, std::span<const TokenBias> biases);

// Guided decoding: logits[t] = -inf for every t in [0, vocab) whose bit in `allowed` (bit t % 32
// of word t / 32) is clear, ids past the words included. vLLM masks before its sampler: the
// log-probabilities, logit bias and penalties all see the masked logits.
void apply_token_mask(float* logits, std::int32_t vocab, std::span<const std::uint32_t> allowed);

// One distinct token that a request's penalties touch: sampled `count` times so far (0: it is
// only in the prompt, which only the repetition penalty looks at).
struct PenaltyTerm {
  std::int32_t token = 0;
  std::int32_t count = 0;
};

// The tokens `p` touches, in token order: every distinct token of outputs (the request's tokens
// sampled so far), and with a repetition penalty every distinct token of the prompt too.
std::vector<PenaltyTerm> penalty_terms(std::span<const std::int32_t> prompt, std::span<const std::int32_t> outputs,
                                       const Penalties& p);

// vLLM's order, term by term: with a repetition penalty r, logits[t] *= (logits[t] > 0 ? 1/r : r);
// then, if count > 0, logits[t] -= frequency · count and logits[t] -= presence. A term outside
// [0, vocab) is skipped (a prompt mirrored from another rank was checked there, not here).
void apply_penalties(float* logits, std::int32_t vocab, std::span<const PenaltyTerm> terms, const Penalties& p);

// Index of the largest logit; the lowest index wins ties (as torch.argmax).
std::int32_t argmax(const float* logits, std::int32_t vocab);

// The generator seed for the token drawn from the logits at `position` of a request seeded
// with `seed`: each draw depends only on (seed, position), so a request replays identically
// however it is batched, wherever it runs, and from any step on.
std::uint64_t position_seed(std::uint64_t seed, std::int64_t position);

// The uniform draw in [0, 1) that a Sampler seeded with `generator_seed` makes first (every
// sample() call draws exactly one): device samplers take it as an argument so they choose
// from the same number the CPU would.
double sampling_uniform(std::uint64_t generator_seed);

// Per-request sampler: owns its generator so a (seed, logits) sequence replays identically
// no matter how requests are batched.
class Sampler {
 public:
  Sampler(SamplingParams params, std::uint64_t seed);
  std::int32_t sample(const float* logits, std::int32_t vocab);
  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, std::int32_t>> scratch_;
};

}  // namespace sy::kernels
