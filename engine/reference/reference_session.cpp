#include "engine/reference/reference_session.h"

#include <string>

#include "engine/forward/forward_pass.h"

namespace sy {

ReferenceSession::ReferenceSession(std::shared_ptr<const ModelWeights> weights,
                                   std::int32_t max_positions, std::int32_t page_size,
                                   kernels::GemmInputs inputs)
    : ops_(weights, inputs),
      max_positions_(max_positions),
      cache_(weights->config(), (max_positions + page_size - 1) / page_size, page_size),
      pages_(cache_.num_pages(), page_size) {}

StatusOr<std::vector<float>> ReferenceSession::forward(std::span<const std::int32_t> tokens,
                                                       bool all_logits) {
  const ModelConfig& c = config();
  if (tokens.empty()) return Status::Error("no tokens to run");
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size) {
      return Status::Error("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                           " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    }
  }
  const std::int64_t end = static_cast<std::int64_t>(kv_.length) + static_cast<std::int64_t>(tokens.size());
  if (end > max_positions_ || !kv_.reserve(pages_, end)) {
    return Status::Error("sequence of " + std::to_string(end) + " positions exceeds the session's " +
                         std::to_string(max_positions_));
  }

  BatchLayout batch;
  batch.add_sequence(static_cast<std::int32_t>(tokens.size()), kv_.length, kv_.block_table());
  std::vector<std::int32_t> rows;
  if (all_logits) {
    for (std::int32_t r = 0; r < static_cast<std::int32_t>(tokens.size()); ++r) rows.push_back(r);
  } else {
    rows.push_back(static_cast<std::int32_t>(tokens.size()) - 1);
  }
  std::vector<float> logits(rows.size() * static_cast<std::size_t>(c.vocab_size));
  forward_pass(ops_, batch, cache_, tokens.data(), rows, logits.data(), ws_, hidden_);
  kv_.length = static_cast<std::int32_t>(end);
  return logits;
}

void ReferenceSession::reset() { kv_.release(pages_); }

StatusOr<std::vector<std::int32_t>> generate(ReferenceSession& session,
                                             std::span<const std::int32_t> prompt,
                                             const GenerateOptions& options) {
  const std::int32_t vocab = session.config().vocab_size;
  std::vector<std::int32_t> out;
  if (options.max_new_tokens <= 0) return out;
  auto logits = session.forward(prompt, /*all_logits=*/false);
  if (!logits.ok()) return logits.status();
  while (true) {
    // The logits came from the last position written: the draw depends on (seed, position) only.
    kernels::Sampler sampler(options.sampling, kernels::position_seed(options.seed, session.length() - 1));
    kernels::apply_logit_bias(logits->data(), vocab, options.logit_bias);
    if (options.penalties.any())
      kernels::apply_penalties(logits->data(), vocab, kernels::penalty_terms(prompt, out, options.penalties),
                               options.penalties);
    std::int32_t next = sampler.sample(logits->data(), vocab);
    out.push_back(next);
    if (static_cast<std::int32_t>(out.size()) >= options.max_new_tokens) break;
    if (options.eos_token_id && next == *options.eos_token_id) break;
    logits = session.forward(std::span<const std::int32_t>(&next, 1), /*all_logits=*/false);
    if (!logits.ok()) return logits.status();
  }
  return out;
}

}  // namespace sy
