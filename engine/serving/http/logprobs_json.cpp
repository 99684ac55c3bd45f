#include "engine/serving/http/logprobs_json.h"

#include <cmath>

namespace sy::http {
namespace {

using nlohmann::json;

// JSON has no -inf: vLLM writes an impossible token's log-probability as -9999.0.
double finite(float logprob) { return std::isfinite(logprob) ? static_cast<double>(logprob) : -9999.0; }

// Characters of a UTF-8 string, as Python's len() counts them (continuation bytes do not count).
std::int64_t characters(const std::string& s) {
  std::int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

json bytes_of(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

LogprobsJson::LogprobsJson(const text::Tokenizer* tokenizer, Endpoint endpoint, std::int32_t top)
    : tokenizer_(tokenizer), endpoint_(endpoint), top_(top) {}

std::string LogprobsJson::token_text(std::int32_t id) const {
  // One token decoded alone (special tokens shown), as vLLM shows each token; a piece of a
  // multi-byte character reads U+FFFD, as Hugging Face's decode gives it.
  if (!tokenizer_) return "token_id:" + std::to_string(id);
  return tokenizer_->decode(std::span<const std::int32_t>(&id, 1), /*skip_special_tokens=*/false);
}

json LogprobsJson::make(std::span<const kernels::TokenLogprobs> tokens) {
  if (tokens.empty()) return nullptr;
  if (endpoint_ == Endpoint::ChatCompletions) {
    json content = json::array();
    for (const kernels::TokenLogprobs& t : tokens) {
      const std::string text = token_text(t.token);
      json top = json::array();
      for (std::size_t i = 0; i < t.top.size() && static_cast<std::int32_t>(i) < top_; ++i) {
        const std::string alt = token_text(t.top[i].first);
        top.push_back({{"token", alt}, {"logprob", finite(t.top[i].second)}, {"bytes", bytes_of(alt)}});
      }
      content.push_back(
          {{"token", text}, {"logprob", finite(t.logprob)}, {"bytes", bytes_of(text)}, {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const kernels::TokenLogprobs& t : tokens) append(out, t);
  return out;
}

void LogprobsJson::append(json& out, const kernels::TokenLogprobs& t) {
  // Completions: each token's dictionary holds its top alternatives and itself (vLLM's).
  const std::string text = token_text(t.token);
  json top = json::object();
  for (std::size_t i = 0; i < t.top.size() && static_cast<std::int32_t>(i) < top_; ++i)
    top[token_text(t.top[i].first)] = finite(t.top[i].second);
  top[text] = finite(t.logprob);
  out["tokens"].push_back(text);
  out["token_logprobs"].push_back(finite(t.logprob));
  out["top_logprobs"].push_back(std::move(top));
  out["text_offset"].push_back(offset_);
  offset_ += characters(text);
}

json LogprobsJson::make_echo(std::int32_t first_prompt_token, std::span<const kernels::TokenLogprobs> prompt,
                             std::span<const kernels::TokenLogprobs> tokens) {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  const std::string first = token_text(first_prompt_token);
  out["tokens"].push_back(first);
  out["token_logprobs"].push_back(nullptr);
  out["top_logprobs"].push_back(nullptr);
  out["text_offset"].push_back(offset_);
  offset_ += characters(first);
  for (const kernels::TokenLogprobs& t : prompt) append(out, t);
  for (const kernels::TokenLogprobs& t : tokens) append(out, t);
  return out;
}

json LogprobsJson::prompt_logprobs(std::span<const kernels::TokenLogprobs> prompt, std::int32_t top) const {
  json out = json::array({nullptr});
  for (const kernels::TokenLogprobs& t : prompt) {
    json entry = json::object();
    const auto put = [&](std::int32_t id, float logprob, std::int32_t rank) {
      entry[std::to_string(id)] = {{"logprob", finite(logprob)}, {"rank", rank}, {"decoded_token", token_text(id)}};
    };
    put(t.token, t.logprob, t.rank);
    for (std::size_t i = 0; i < t.top.size() && static_cast<std::int32_t>(i) < top; ++i)
      put(t.top[i].first, t.top[i].second, static_cast<std::int32_t>(i) + 1);
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace sy::http
