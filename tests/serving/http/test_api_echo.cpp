// /v1/completions with echo and vLLM's prompt_logprobs, as lm-evaluation-harness's
// local-completions model scores loglikelihood tasks: the prompt's log-probabilities (against
// the reference path's logits), the answer shapes it parses, max_tokens 0, streaming, and the
// errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/random_model.h"
#include "engine/reference/reference_session.h"
#include "tests/serving/http/live_server.h"

namespace sy::http {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ApiEchoTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("sy_test_http_echo_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 1, dir_).ok());
    weights_ = *ModelWeights::load(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // log P(prompt[i] | prompt[< i]) for i ≥ 1 by the reference path (index i − 1), and whether
  // each token is the most likely one there.
  static void reference(const std::vector<std::int32_t>& prompt, std::vector<double>& logprobs,
                        std::vector<bool>& greedy) {
    ReferenceSession session(weights_, static_cast<std::int32_t>(prompt.size()));
    auto logits = session.forward(prompt, /*all_logits=*/true);
    ASSERT_TRUE(logits.ok());
    const std::int64_t vocab = weights_->config().vocab_size;
    for (std::size_t i = 1; i < prompt.size(); ++i) {
      const float* row = logits->data() + static_cast<std::int64_t>(i - 1) * vocab;
      double max = -INFINITY, total = 0;
      for (std::int64_t v = 0; v < vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
      for (std::int64_t v = 0; v < vocab; ++v) total += std::exp(row[v] - max);
      logprobs.push_back(row[prompt[i]] - max - std::log(total));
      greedy.push_back(row[prompt[i]] == max);
    }
  }
  static json post(httplib::Client& c, const json& body, int expect_status, const std::string& path = "/v1/completions") {
    auto res = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, expect_status) << res->body;
    return json::parse(res->body);
  }
  // The data events of a streamed answer, parsed.
  static std::vector<json> events(httplib::Client& c, const json& body) {
    auto res = c.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    if (!res) return {};
    return parse_sse(res->body).data;
  }

  static inline fs::path dir_;
  static inline std::shared_ptr<const ModelWeights> weights_;
  static inline const std::vector<std::int32_t> kContext = {5, 17, 42, 9, 77, 3};
  static inline const std::vector<std::int32_t> kContinuation = {101, 11, 64};
};

std::vector<std::int32_t> joined(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  std::vector<std::int32_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// lm-eval's request (context + continuation as token ids, echo, logprobs 1, max_tokens 1,
// greedy) and its parse_logprobs: sum(token_logprobs[ctxlen:-1]), greedy when each token's
// value is the largest of its top_logprobs.
TEST_F(ApiEchoTest, EchoWithLogprobsScoresAContinuationAsLmEvalReadsIt) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const std::vector<std::int32_t> prompt = joined(kContext, kContinuation);
  const json answer = post(c, {{"prompt", prompt}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 1}, {"temperature", 0}}, 200);
  const json& choice = answer["choices"][0];
  const json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), prompt.size() + 1) << "the prompt's tokens, then the generated one";
  ASSERT_EQ(lp["token_logprobs"].size(), prompt.size() + 1);
  ASSERT_EQ(lp["top_logprobs"].size(), prompt.size() + 1);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null()) << "the first prompt token has nothing before it";
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (std::size_t i = 0; i < prompt.size(); ++i)
    EXPECT_EQ(lp["tokens"][i], "token_id:" + std::to_string(prompt[i])) << "position " << i;
  // text_offset: each token's text starts where the one before it ended.
  for (std::size_t i = 1; i < lp["tokens"].size(); ++i)
    EXPECT_EQ(lp["text_offset"][i].get<std::int64_t>(),
              lp["text_offset"][i - 1].get<std::int64_t>() +
                  static_cast<std::int64_t>(lp["tokens"][i - 1].get<std::string>().size()));
  EXPECT_EQ(lp["text_offset"][0], 0);

  std::vector<double> want;
  std::vector<bool> want_greedy;
  reference(prompt, want, want_greedy);
  const std::size_t ctxlen = kContext.size();
  double sum = 0, want_sum = 0;
  bool is_greedy = true, want_is_greedy = true;
  for (std::size_t i = ctxlen; i + 1 < lp["token_logprobs"].size(); ++i) {  // [ctxlen:-1]
    const double v = lp["token_logprobs"][i].get<double>();
    sum += v;
    double best = -INFINITY;
    for (const auto& [text, value] : lp["top_logprobs"][i].items()) best = std::max(best, value.get<double>());
    if (v != best) is_greedy = false;
    EXPECT_NEAR(v, want[i - 1], 1e-4) << "position " << i;
    want_sum += want[i - 1];
    want_is_greedy = want_is_greedy && want_greedy[i - 1];
  }
  EXPECT_NEAR(sum, want_sum, 3e-4);
  EXPECT_EQ(is_greedy, want_is_greedy);
  // Every prompt position, not only the continuation's.
  for (std::size_t i = 1; i < prompt.size(); ++i)
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), want[i - 1], 1e-4) << "position " << i;
  EXPECT_EQ(choice["token_ids"].size(), 1u) << "token_ids stays the generated ones";
  EXPECT_EQ(answer["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(answer["usage"]["completion_tokens"], 1);
  EXPECT_FALSE(choice.contains("prompt_logprobs")) << "only when asked for by name";

  // The same request without echo: the generated token's numbers are the echo's last.
  const json plain = post(c, {{"prompt", prompt}, {"logprobs", 1}, {"max_tokens", 1}, {"temperature", 0}}, 200);
  ASSERT_EQ(plain["choices"][0]["logprobs"]["token_logprobs"].size(), 1u);
  EXPECT_EQ(plain["choices"][0]["logprobs"]["token_logprobs"][0], lp["token_logprobs"].back());
  EXPECT_EQ(plain["choices"][0]["token_ids"], choice["token_ids"]);
  EXPECT_TRUE(s.kv_freed());
}

// max_tokens 0 with echo is the prompt alone (vLLM's answer): its log-probabilities, no token.
TEST_F(ApiEchoTest, MaxTokensZeroAnswersThePromptAlone) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const std::vector<std::int32_t> prompt = joined(kContext, kContinuation);
  const json answer = post(c, {{"prompt", prompt}, {"echo", true}, {"logprobs", 0}, {"max_tokens", 0}}, 200);
  const json& choice = answer["choices"][0];
  ASSERT_EQ(choice["logprobs"]["token_logprobs"].size(), prompt.size());
  EXPECT_TRUE(choice["logprobs"]["token_logprobs"][0].is_null());
  std::vector<double> want;
  std::vector<bool> greedy;
  reference(prompt, want, greedy);
  for (std::size_t i = 1; i < prompt.size(); ++i) {
    EXPECT_NEAR(choice["logprobs"]["token_logprobs"][i].get<double>(), want[i - 1], 1e-4) << "position " << i;
    // logprobs 0: the dictionary holds the prompt's token alone.
    EXPECT_EQ(choice["logprobs"]["top_logprobs"][i].size(), 1u);
  }
  EXPECT_EQ(choice["token_ids"], json::array());
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(answer["usage"]["completion_tokens"], 0);
  EXPECT_EQ(answer["usage"]["prompt_tokens"], prompt.size());

  // Streamed: one chunk, the prompt's, with the finish reason.
  const std::vector<json> chunks =
      events(c, {{"prompt", prompt}, {"echo", true}, {"logprobs", 0}, {"max_tokens", 0}, {"stream", true}});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0]["choices"][0]["logprobs"]["token_logprobs"], choice["logprobs"]["token_logprobs"]);
  EXPECT_EQ(chunks[0]["choices"][0]["token_ids"], json::array());
  EXPECT_EQ(chunks[0]["choices"][0]["finish_reason"], "length");

  // Without echo there is nothing to answer.
  EXPECT_EQ(post(c, {{"prompt", prompt}, {"max_tokens", 0}}, 400)["error"]["param"], "max_tokens");
  EXPECT_TRUE(s.kv_freed());
}

// vLLM's prompt_logprobs: [null, {"<id>": {"logprob", "rank", "decoded_token"}}, ...], the
// prompt's token and the k most likely ones at each position.
TEST_F(ApiEchoTest, PromptLogprobsHaveVllmsShape) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const std::vector<std::int32_t> prompt = joined(kContext, kContinuation);
  const json answer = post(c, {{"prompt", prompt}, {"prompt_logprobs", 2}, {"max_tokens", 2}, {"temperature", 0}}, 200);
  const json& choice = answer["choices"][0];
  EXPECT_TRUE(choice["logprobs"].is_null()) << "logprobs was not asked for";
  const json& pl = choice["prompt_logprobs"];
  ASSERT_TRUE(pl.is_array());
  ASSERT_EQ(pl.size(), prompt.size());
  EXPECT_TRUE(pl[0].is_null());
  std::vector<double> want;
  std::vector<bool> greedy;
  reference(prompt, want, greedy);
  for (std::size_t i = 1; i < prompt.size(); ++i) {
    const std::string id = std::to_string(prompt[i]);
    ASSERT_TRUE(pl[i].contains(id)) << pl[i].dump();
    EXPECT_NEAR(pl[i][id]["logprob"].get<double>(), want[i - 1], 1e-4) << "position " << i;
    EXPECT_EQ(pl[i][id]["decoded_token"], "token_id:" + id);
    EXPECT_GE(pl[i][id]["rank"].get<int>(), 1);
    if (greedy[i - 1]) {
      EXPECT_EQ(pl[i][id]["rank"], 1);
    }
    EXPECT_TRUE(pl[i].size() == 2 || pl[i].size() == 3) << "the token and 2 alternatives: " << pl[i].dump();
    std::vector<int> ranks;
    for (const auto& [key, entry] : pl[i].items()) ranks.push_back(entry["rank"].get<int>());
    EXPECT_NE(std::find(ranks.begin(), ranks.end(), 1), ranks.end()) << "the most likely token is there";
  }
  EXPECT_EQ(choice["token_ids"].size(), 2u);
  EXPECT_TRUE(s.kv_freed());
}

// Streamed with echo (vLLM's): the first chunk carries the prompt's text and log-probabilities
// with the first token's, the others a token each, and together they are the whole answer's.
TEST_F(ApiEchoTest, StreamedEchoSendsThePromptWithTheFirstChunk) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const std::vector<std::int32_t> prompt = joined(kContext, kContinuation);
  const json body = {{"prompt", prompt}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 3}, {"temperature", 0},
                     {"ignore_eos", true}};
  const json whole = post(c, body, 200);
  json streamed_body = body;
  streamed_body["stream"] = true;
  const std::vector<json> chunks = events(c, streamed_body);
  // A token each, the finish reason on the last (or, when the end comes after the last token,
  // on one more chunk with no token: http-api.md).
  ASSERT_GE(chunks.size(), 3u);
  EXPECT_EQ(chunks[0]["choices"][0]["logprobs"]["tokens"].size(), prompt.size() + 1);
  EXPECT_EQ(chunks[0]["choices"][0]["token_ids"].size(), 1u);
  EXPECT_EQ(chunks[1]["choices"][0]["logprobs"]["tokens"].size(), 1u);
  json values = json::array(), offsets = json::array();
  for (const json& chunk : chunks)
    for (std::size_t i = 0; !chunk["choices"][0]["logprobs"].is_null() &&
                            i < chunk["choices"][0]["logprobs"]["token_logprobs"].size();
         ++i) {
      values.push_back(chunk["choices"][0]["logprobs"]["token_logprobs"][i]);
      offsets.push_back(chunk["choices"][0]["logprobs"]["text_offset"][i]);
    }
  EXPECT_EQ(values, whole["choices"][0]["logprobs"]["token_logprobs"]);
  EXPECT_EQ(offsets, whole["choices"][0]["logprobs"]["text_offset"]);

  // vLLM's rule: prompt_logprobs above 0 do not stream.
  json refused = body;
  refused["stream"] = true;
  refused["prompt_logprobs"] = 1;
  EXPECT_EQ(post(c, refused, 400)["error"]["param"], "prompt_logprobs");
  EXPECT_TRUE(s.kv_freed());
}

// With prefix caching on, a request scoring its prompt computes every position (nothing from the
// cache) and scores it as without the cache.
TEST_F(ApiEchoTest, PrefixCachingLeavesThePromptsNumbersAlone) {
  CoordinatorOptions co;
  co.prefix_caching = true;
  LiveServer s(weights_, co);
  auto c = s.client();
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 3; ++i) prompt.insert(prompt.end(), kContext.begin(), kContext.end());  // past a page of 16
  prompt.insert(prompt.end(), kContinuation.begin(), kContinuation.end());
  post(c, {{"prompt", prompt}, {"max_tokens", 1}}, 200);  // writes the prompt's pages
  const json again = post(c, {{"prompt", prompt}, {"max_tokens", 1}}, 200);
  EXPECT_GT(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0) << "the cache is warm";
  const json scored = post(c, {{"prompt", prompt}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 1}}, 200);
  EXPECT_EQ(scored["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  std::vector<double> want;
  std::vector<bool> greedy;
  reference(prompt, want, greedy);
  const json& values = scored["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(values.size(), prompt.size() + 1);
  for (std::size_t i = 1; i < prompt.size(); ++i)
    EXPECT_NEAR(values[i].get<double>(), want[i - 1], 1e-4) << "position " << i;
  EXPECT_TRUE(s.kv_freed());
}

TEST_F(ApiEchoTest, ErrorsNameTheField) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  json chat_echo = chat;
  chat_echo["echo"] = true;
  EXPECT_EQ(post(c, chat_echo, 400, "/v1/chat/completions")["error"]["param"], "echo");
  json chat_prompt = chat;
  chat_prompt["prompt_logprobs"] = 1;
  EXPECT_EQ(post(c, chat_prompt, 400, "/v1/chat/completions")["error"]["param"], "prompt_logprobs");
  EXPECT_EQ(post(c, {{"prompt", {1, 2}}, {"prompt_logprobs", 21}}, 400)["error"]["param"], "prompt_logprobs");
  EXPECT_EQ(post(c, {{"prompt", {1, 2}}, {"prompt_logprobs", -1}}, 400)["error"]["param"], "prompt_logprobs");
  EXPECT_EQ(post(c, {{"prompt", {1, 2}}, {"echo", 1}}, 400)["error"]["param"], "echo");
}

}  // namespace
}  // namespace sy::http
