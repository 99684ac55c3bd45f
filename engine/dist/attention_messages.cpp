#include "engine/dist/attention_messages.h"

#include "engine/dist/guide_messages.h"

#include <cmath>
#include <cstring>

namespace sy::dist {
namespace {

void put_sampling(ByteWriter& w, const SamplingSpec& s) {
  w.put<float>(s.temperature);
  w.put<float>(s.top_p);
  w.put<std::int32_t>(s.top_k);
  w.put<std::uint64_t>(s.seed);
  w.put<std::int32_t>(s.logprobs);
  w.put<float>(s.min_p);
  w.put<float>(s.presence_penalty);
  w.put<float>(s.frequency_penalty);
  w.put<float>(s.repetition_penalty);
  w.put<std::int32_t>(s.prompt_logprobs);
}

Status get_sampling(ByteReader& r, SamplingSpec& s) {
  SY_RETURN_IF_ERROR(r.get(s.temperature));
  SY_RETURN_IF_ERROR(r.get(s.top_p));
  SY_RETURN_IF_ERROR(r.get(s.top_k));
  SY_RETURN_IF_ERROR(r.get(s.seed));
  SY_RETURN_IF_ERROR(r.get(s.logprobs));
  SY_RETURN_IF_ERROR(r.get(s.min_p));
  SY_RETURN_IF_ERROR(r.get(s.presence_penalty));
  SY_RETURN_IF_ERROR(r.get(s.frequency_penalty));
  SY_RETURN_IF_ERROR(r.get(s.repetition_penalty));
  SY_RETURN_IF_ERROR(r.get(s.prompt_logprobs));
  // Nothing rank 0 admits lies outside these (NaN included); anything else is not rank 0's.
  auto penalty = [](float p) { return p >= -2.0f && p <= 2.0f; };
  if (!(std::isfinite(s.temperature) && s.temperature >= 0.0f) || !(s.top_p >= 0.0f && s.top_p <= 1.0f) ||
      s.top_k < 0 || s.logprobs < -1 || s.logprobs > kernels::kMaxTopLogprobs || s.prompt_logprobs < -1 ||
      s.prompt_logprobs > kernels::kMaxTopLogprobs || !(s.min_p >= 0.0f && s.min_p <= 1.0f) ||
      !penalty(s.presence_penalty) || !penalty(s.frequency_penalty) ||
      !(std::isfinite(s.repetition_penalty) && s.repetition_penalty > 0.0f))
    return Status::Error("sampling out of range");
  return Status::Ok();
}

// Bitwise, so that a NaN that travelled compares equal to itself.
bool same(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same_top(const kernels::TokenLogprobs& a, const kernels::TokenLogprobs& b) {
  if (a.top.size() != b.top.size()) return false;
  for (std::size_t i = 0; i < a.top.size(); ++i)
    if (a.top[i].first != b.top[i].first || !same(a.top[i].second, b.top[i].second)) return false;
  return true;
}

void put_top(ByteWriter& w, const kernels::TokenLogprobs& t) {
  w.put<std::uint32_t>(static_cast<std::uint32_t>(t.top.size()));
  for (const auto& [token, logprob] : t.top) {
    w.put<std::int32_t>(token);
    w.put<float>(logprob);
  }
}

Status get_top(ByteReader& r, kernels::TokenLogprobs& t) {
  std::uint32_t n = 0;
  SY_RETURN_IF_ERROR(r.get(n));
  if (n > static_cast<std::uint32_t>(kernels::kMaxTopLogprobs))
    return Status::Error(std::to_string(n) + " top log-probabilities (at most " +
                         std::to_string(kernels::kMaxTopLogprobs) + ")");
  t.top.resize(n);
  for (auto& [token, logprob] : t.top) {
    SY_RETURN_IF_ERROR(r.get(token));
    SY_RETURN_IF_ERROR(r.get(logprob));
  }
  return Status::Ok();
}

}  // namespace

bool PromptScores::operator==(const PromptScores& o) const {
  const PromptLogprobs& a = logprobs;
  const PromptLogprobs& b = o.logprobs;
  if (a.request != b.request || a.first_position != b.first_position || a.tokens.size() != b.tokens.size())
    return false;
  for (std::size_t i = 0; i < a.tokens.size(); ++i) {
    const kernels::TokenLogprobs& x = a.tokens[i];
    const kernels::TokenLogprobs& y = b.tokens[i];
    if (x.token != y.token || !same(x.logprob, y.logprob) || x.rank != y.rank || !same_top(x, y)) return false;
  }
  return true;
}

bool SequenceOpen::operator==(const SequenceOpen& o) const {
  const bool same_grammar = grammar == o.grammar || (grammar && o.grammar && *grammar == *o.grammar);
  return rank == o.rank && request == o.request && pages == o.pages && sampling == o.sampling && prompt == o.prompt &&
         logit_bias == o.logit_bias && prompt_length == o.prompt_length && same_grammar;
}

bool Sampled::operator==(const Sampled& o) const {
  if (request != o.request || token != o.token || logprobs.has_value() != o.logprobs.has_value()) return false;
  if (!logprobs) return true;
  return logprobs->token == o.logprobs->token && same(logprobs->logprob, o.logprobs->logprob) &&
         same_top(*logprobs, *o.logprobs);
}

std::string encode(const SequenceOpen& m) {
  ByteWriter w = message_writer(MessageType::SequenceOpen);
  w.put<std::int32_t>(m.rank);
  w.put<std::int64_t>(m.request);
  w.put_array(m.pages);
  put_sampling(w, m.sampling);
  w.put_array(m.prompt);
  w.put<std::uint64_t>(m.logit_bias.size());
  for (const kernels::TokenBias& b : m.logit_bias) {
    w.put<std::int32_t>(b.token);
    w.put<float>(b.bias);
  }
  w.put<std::int32_t>(m.prompt_length);
  w.put<std::uint8_t>(m.grammar ? 1 : 0);
  if (m.grammar) put_grammar(w, *m.grammar);
  return std::move(w.bytes());
}

std::string encode(const SequenceClose& m) {
  ByteWriter w = message_writer(MessageType::SequenceClose);
  w.put<std::int32_t>(m.rank);
  w.put<std::int64_t>(m.request);
  return std::move(w.bytes());
}

std::string encode(const Sampled& m) {
  ByteWriter w = message_writer(MessageType::Sampled);
  w.put<std::int64_t>(m.request);
  w.put<std::int32_t>(m.token);
  w.put<std::uint8_t>(m.logprobs ? 1 : 0);
  if (m.logprobs) {
    w.put<std::int32_t>(m.logprobs->token);
    w.put<float>(m.logprobs->logprob);
    put_top(w, *m.logprobs);
  }
  return std::move(w.bytes());
}

std::string encode(const PromptScores& m) {
  ByteWriter w = message_writer(MessageType::PromptScores);
  w.put<std::int64_t>(m.logprobs.request);
  w.put<std::int32_t>(m.logprobs.first_position);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(m.logprobs.tokens.size()));
  for (const kernels::TokenLogprobs& t : m.logprobs.tokens) {
    w.put<std::int32_t>(t.token);
    w.put<float>(t.logprob);
    w.put<std::int32_t>(t.rank);
    put_top(w, t);
  }
  return std::move(w.bytes());
}

std::string encode(const GroupSampled& m) {
  ByteWriter w = message_writer(MessageType::GroupSampled);
  w.put<std::int32_t>(m.rank);
  w.put<std::int32_t>(m.group);
  return std::move(w.bytes());
}

Status decode(ByteReader& r, SequenceOpen& m) {
  SY_RETURN_IF_ERROR(r.get(m.rank));
  SY_RETURN_IF_ERROR(r.get(m.request));
  SY_RETURN_IF_ERROR(r.get_array(m.pages));
  for (std::int32_t p : m.pages)
    if (p < 0) return Status::Error("page " + std::to_string(p));
  SY_RETURN_IF_ERROR(get_sampling(r, m.sampling));
  SY_RETURN_IF_ERROR(r.get_array(m.prompt));
  for (std::int32_t t : m.prompt)
    if (t < 0) return Status::Error("prompt token " + std::to_string(t));
  std::uint64_t n = 0;
  SY_RETURN_IF_ERROR(r.get(n));
  // Each entry is 8 bytes: a count beyond what is left is not a message rank 0 sent.
  if (n > r.left() / 8) return Status::Error("logit bias of " + std::to_string(n) + " entries");
  m.logit_bias.resize(static_cast<std::size_t>(n));
  for (kernels::TokenBias& b : m.logit_bias) {
    SY_RETURN_IF_ERROR(r.get(b.token));
    SY_RETURN_IF_ERROR(r.get(b.bias));
    if (b.token < 0 || !(b.bias >= -100.0f && b.bias <= 100.0f))
      return Status::Error("logit bias " + std::to_string(b.token) + ": " + std::to_string(b.bias));
  }
  // Rank 0 sends each token once, in order (the HTTP layer refuses repeats): the cuda sampler
  // gives each entry a thread of its own, so a repeated token would be two racing writes.
  for (std::size_t i = 1; i < m.logit_bias.size(); ++i)
    if (m.logit_bias[i].token <= m.logit_bias[i - 1].token)
      return Status::Error("logit bias tokens out of order or repeated at token " +
                           std::to_string(m.logit_bias[i].token));
  SY_RETURN_IF_ERROR(r.get(m.prompt_length));
  if (m.prompt_length < 0) return Status::Error("prompt length " + std::to_string(m.prompt_length));
  std::uint8_t guided = 0;
  SY_RETURN_IF_ERROR(r.get(guided));
  if (guided > 1) return Status::Error("grammar flag " + std::to_string(guided));
  m.grammar.reset();
  if (guided == 1) {
    auto grammar = std::make_shared<structured::Grammar>();
    if (const Status s = get_grammar(r, *grammar); !s.ok()) return Status::Error("guided request: " + s.message());
    m.grammar = std::move(grammar);
  }
  return Status::Ok();
}

Status decode(ByteReader& r, SequenceClose& m) {
  SY_RETURN_IF_ERROR(r.get(m.rank));
  return r.get(m.request);
}

Status decode(ByteReader& r, Sampled& m) {
  SY_RETURN_IF_ERROR(r.get(m.request));
  SY_RETURN_IF_ERROR(r.get(m.token));
  // −1 is Worker::kNoToken; the vocabulary's bound is the receiver's to check (it knows the model).
  if (m.token < -1) return Status::Error("sampled token " + std::to_string(m.token));
  std::uint8_t has = 0;
  SY_RETURN_IF_ERROR(r.get(has));
  m.logprobs.reset();
  if (has > 1) return Status::Error("log-probability flag " + std::to_string(has));
  if (!has) return Status::Ok();
  kernels::TokenLogprobs lp;
  SY_RETURN_IF_ERROR(r.get(lp.token));
  if (lp.token < 0) return Status::Error("log-probability of token " + std::to_string(lp.token));
  SY_RETURN_IF_ERROR(r.get(lp.logprob));
  SY_RETURN_IF_ERROR(get_top(r, lp));
  m.logprobs = std::move(lp);
  return Status::Ok();
}

Status decode(ByteReader& r, PromptScores& m) {
  PromptLogprobs& p = m.logprobs;
  SY_RETURN_IF_ERROR(r.get(p.request));
  SY_RETURN_IF_ERROR(r.get(p.first_position));
  if (p.first_position < 1) return Status::Error("prompt position " + std::to_string(p.first_position));
  std::uint32_t n = 0;
  SY_RETURN_IF_ERROR(r.get(n));
  // Each token takes 16 bytes at least: a count beyond what is left is not a message a rank sent.
  if (n > r.left() / 16) return Status::Error(std::to_string(n) + " prompt tokens");
  p.tokens.resize(n);
  for (kernels::TokenLogprobs& t : p.tokens) {
    SY_RETURN_IF_ERROR(r.get(t.token));
    SY_RETURN_IF_ERROR(r.get(t.logprob));
    SY_RETURN_IF_ERROR(r.get(t.rank));
    if (t.token < 0 || t.rank < 1)
      return Status::Error("prompt token " + std::to_string(t.token) + " of rank " + std::to_string(t.rank));
    SY_RETURN_IF_ERROR(get_top(r, t));
  }
  return Status::Ok();
}

Status decode(ByteReader& r, GroupSampled& m) {
  SY_RETURN_IF_ERROR(r.get(m.rank));
  return r.get(m.group);
}

}  // namespace sy::dist
