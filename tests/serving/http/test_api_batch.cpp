// /v1/completions with a list of prompts (OpenAI's and vLLM's batch form, what
// lm-evaluation-harness's local-completions sends at batch_size > 1): choice p × n + i is what
// prompt p alone with seed + i answers, whole and streamed; usage sums the prompts; echo scores
// each choice's own prompt; a client that leaves cancels every choice of every prompt.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/random_model.h"
#include "tests/serving/http/live_server.h"

namespace sy::http {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ApiBatchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("sy_test_http_batch_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 1, dir_).ok());
    weights_ = *ModelWeights::load(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static json post(httplib::Client& c, const json& body, int expect_status) {
    auto res = c.Post("/v1/completions", body.dump(), "application/json");
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
  // The streamed chunks put together per choice index, as the whole answer's choices.
  static std::map<int, json> assembled(const std::vector<json>& chunks) {
    std::map<int, json> out;
    for (const json& chunk : chunks)
      for (const json& choice : chunk["choices"]) {
        json& c = out[choice["index"].get<int>()];
        if (c.is_null()) c = {{"token_ids", json::array()}, {"token_logprobs", json::array()}, {"finishes", 0}};
        for (const json& t : choice["token_ids"]) c["token_ids"].push_back(t);
        if (!choice["logprobs"].is_null())
          for (const json& v : choice["logprobs"]["token_logprobs"]) c["token_logprobs"].push_back(v);
        if (!choice["finish_reason"].is_null()) {
          c["finish_reason"] = choice["finish_reason"];
          c["finishes"] = c["finishes"].get<int>() + 1;
        }
      }
    return out;
  }

  // The same tokens, offsets and alternatives; the values within float noise (requests batched
  // together in the engine sum their rows in another order: ~1e-6).
  static void expect_same_logprobs(const json& got, const json& want) {
    ASSERT_TRUE(got.is_object() && want.is_object()) << got << " vs " << want;
    EXPECT_EQ(got["tokens"], want["tokens"]);
    EXPECT_EQ(got["text_offset"], want["text_offset"]);
    ASSERT_EQ(got["token_logprobs"].size(), want["token_logprobs"].size());
    for (std::size_t i = 0; i < got["token_logprobs"].size(); ++i) {
      if (want["token_logprobs"][i].is_null()) {
        EXPECT_TRUE(got["token_logprobs"][i].is_null());
        continue;
      }
      EXPECT_NEAR(got["token_logprobs"][i].get<double>(), want["token_logprobs"][i].get<double>(), 1e-5) << i;
      ASSERT_EQ(got["top_logprobs"][i].size(), want["top_logprobs"][i].size()) << i;
      for (const auto& [token, value] : want["top_logprobs"][i].items()) {
        ASSERT_TRUE(got["top_logprobs"][i].contains(token)) << token;
        EXPECT_NEAR(got["top_logprobs"][i][token].get<double>(), value.get<double>(), 1e-5) << token;
      }
    }
  }

  static inline fs::path dir_;
  static inline std::shared_ptr<const ModelWeights> weights_;
  static inline const std::vector<std::vector<std::int32_t>> kPrompts = {{11, 12, 13}, {5, 17, 42, 9, 77}, {64, 3}};
};

// Three prompts × n = 2, sampled with a seed and with penalties, a logit bias and logprobs:
// choice p × 2 + i is, token for token, prompt p alone with seed + i (its log-probabilities
// within float noise); the same greedy; usage counts each prompt once and every choice's tokens.
TEST_F(ApiBatchTest, EachChoiceIsWhatItsPromptAloneAnswers) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const json base = {{"max_tokens", 6},          {"temperature", 1.0},       {"ignore_eos", true},
                     {"presence_penalty", 0.5}, {"logit_bias", {{"7", 2}}}, {"logprobs", 1}};
  for (const bool greedy : {false, true}) {
    json body = base;
    body["prompt"] = kPrompts;
    body["n"] = 2;
    body["seed"] = 40;
    if (greedy) body["temperature"] = 0;
    const json batch = post(c, body, 200);
    ASSERT_EQ(batch["choices"].size(), 6u);
    std::int64_t completion_tokens = 0;
    for (std::size_t p = 0; p < kPrompts.size(); ++p)
      for (int i = 0; i < 2; ++i) {
        json one = base;
        one["prompt"] = kPrompts[p];
        one["seed"] = 40 + i;
        if (greedy) one["temperature"] = 0;
        const json single = post(c, one, 200)["choices"][0];
        const json& choice = batch["choices"][p * 2 + static_cast<std::size_t>(i)];
        EXPECT_EQ(choice["index"], p * 2 + static_cast<std::size_t>(i));
        EXPECT_EQ(choice["token_ids"], single["token_ids"]) << "prompt " << p << " choice " << i << " greedy " << greedy;
        expect_same_logprobs(choice["logprobs"], single["logprobs"]);
        EXPECT_EQ(choice["finish_reason"], single["finish_reason"]);
        completion_tokens += static_cast<std::int64_t>(choice["token_ids"].size());
      }
    if (!greedy) {
      EXPECT_NE(batch["choices"][0]["token_ids"], batch["choices"][1]["token_ids"]) << "seed 40 and 41 differ";
    }
    EXPECT_EQ(batch["usage"]["prompt_tokens"], 3 + 5 + 2) << "each prompt once, as vLLM counts";
    EXPECT_EQ(batch["usage"]["completion_tokens"], completion_tokens);
    EXPECT_EQ(batch["usage"]["total_tokens"], 10 + completion_tokens);
  }
  EXPECT_TRUE(s.kv_freed());
}

// Streamed: the chunks of all six choices interleave, each naming its index; put together per
// index they are the whole answer's choices; usage (on the last chunk, or in OpenAI's separate
// chunk) is the whole answer's.
TEST_F(ApiBatchTest, StreamedIsTheWholeAnswer) {
  LiveServer s(weights_, {});
  auto c = s.client();
  json body = {{"prompt", kPrompts}, {"n", 2},         {"seed", 7},        {"max_tokens", 5},
               {"temperature", 1.0}, {"logprobs", 0}, {"ignore_eos", true}};
  const json whole = post(c, body, 200);
  body["stream"] = true;
  const std::vector<json> chunks = events(c, body);
  const std::map<int, json> streamed = assembled(chunks);
  ASSERT_EQ(streamed.size(), 6u);
  for (const auto& [index, choice] : streamed) {
    const json& w = whole["choices"][static_cast<std::size_t>(index)];
    EXPECT_EQ(choice["token_ids"], w["token_ids"]) << "choice " << index;
    // The two answers ran in different batches on the wall clock, and the cpu kernels' sums over
    // a batch may round differently in the last digits: the same numbers, not the same bits.
    const json& lp = w["logprobs"]["token_logprobs"];
    ASSERT_EQ(choice["token_logprobs"].size(), lp.size()) << "choice " << index;
    for (std::size_t k = 0; k < lp.size(); ++k)
      EXPECT_NEAR(choice["token_logprobs"][k].get<double>(), lp[k].get<double>(), 1e-4) << "choice " << index << " token " << k;
    EXPECT_EQ(choice["finish_reason"], w["finish_reason"]);
    EXPECT_EQ(choice["finishes"], 1);
  }
  ASSERT_FALSE(chunks.empty());
  EXPECT_EQ(chunks.back()["usage"], whole["usage"]);

  body["stream_options"] = {{"include_usage", true}};
  const std::vector<json> with_usage = events(c, body);
  ASSERT_FALSE(with_usage.empty());
  EXPECT_EQ(with_usage.back()["choices"], json::array());
  EXPECT_EQ(with_usage.back()["usage"], whole["usage"]);
  EXPECT_TRUE(s.kv_freed());
}

// lm-eval's loglikelihood batch: several context + continuation prompts with echo, logprobs 1,
// max_tokens 1, greedy. Sorted by index (one choice per prompt), sum(token_logprobs[ctxlen:-1])
// of each is the single request's; each choice scores its own prompt (and, asked for,
// prompt_logprobs of its own length). max_tokens 0 answers each prompt alone.
TEST_F(ApiBatchTest, LmEvalBatchScoresEachPromptAsAlone) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const std::vector<std::size_t> ctxlen = {2, 3, 1};
  const json base = {{"echo", true}, {"logprobs", 1}, {"max_tokens", 1}, {"temperature", 0}};
  json body = base;
  body["prompt"] = kPrompts;
  body["prompt_logprobs"] = 0;
  const json batch = post(c, body, 200);
  ASSERT_EQ(batch["choices"].size(), kPrompts.size());
  std::vector<json> sorted(batch["choices"].begin(), batch["choices"].end());
  std::sort(sorted.begin(), sorted.end(), [](const json& a, const json& b) { return a["index"] < b["index"]; });
  const auto continuation_sum = [](const json& lp, std::size_t from) {
    double sum = 0;
    for (std::size_t i = from; i + 1 < lp["token_logprobs"].size(); ++i) sum += lp["token_logprobs"][i].get<double>();
    return sum;
  };
  for (std::size_t p = 0; p < kPrompts.size(); ++p) {
    json one = base;
    one["prompt"] = kPrompts[p];
    const json single = post(c, one, 200)["choices"][0];
    const json& lp = sorted[p]["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), kPrompts[p].size() + 1) << "prompt " << p << ": its own tokens, then one";
    EXPECT_TRUE(lp["token_logprobs"][0].is_null());
    EXPECT_NEAR(continuation_sum(lp, ctxlen[p]), continuation_sum(single["logprobs"], ctxlen[p]), 1e-5) << "prompt " << p;
    for (std::size_t i = 1; i < lp["token_logprobs"].size(); ++i)
      EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), single["logprobs"]["token_logprobs"][i].get<double>(), 1e-5)
          << "prompt " << p << " position " << i;
    EXPECT_EQ(sorted[p]["token_ids"], single["token_ids"]);
    EXPECT_EQ(sorted[p]["prompt_logprobs"].size(), kPrompts[p].size());
  }
  EXPECT_EQ(batch["usage"]["prompt_tokens"], 10);
  EXPECT_EQ(batch["usage"]["completion_tokens"], 3);

  // max_tokens 0: each choice is its prompt alone; streamed, one chunk per prompt.
  body.erase("prompt_logprobs");
  body["max_tokens"] = 0;
  const json alone = post(c, body, 200);
  for (std::size_t p = 0; p < kPrompts.size(); ++p) {
    EXPECT_EQ(alone["choices"][p]["logprobs"]["token_logprobs"].size(), kPrompts[p].size());
    EXPECT_EQ(alone["choices"][p]["token_ids"], json::array());
  }
  EXPECT_EQ(alone["usage"]["completion_tokens"], 0);
  body["stream"] = true;
  const std::map<int, json> streamed = assembled(events(c, body));
  ASSERT_EQ(streamed.size(), kPrompts.size());
  for (const auto& [index, choice] : streamed)
    EXPECT_EQ(choice["token_logprobs"], alone["choices"][static_cast<std::size_t>(index)]["logprobs"]["token_logprobs"]);
  EXPECT_TRUE(s.kv_freed());
}

// A client that leaves mid-stream, or gives up on a whole answer, cancels every choice of every
// prompt and frees their KV.
TEST_F(ApiBatchTest, AClientThatLeavesCancelsEveryChoiceOfEveryPrompt) {
  const std::vector<std::vector<std::int32_t>> prompts = {{1, 2, 3}, {4, 5}};
  for (const bool stream : {true, false}) {
    LiveServer s(weights_, {});
    auto c = s.client();
    json body = {{"prompt", prompts}, {"max_tokens", 2000}, {"ignore_eos", true}, {"n", 2}};
    if (stream) body["stream"] = true;
    // Streamed, the client hangs up after 12 events; whole, once the four requests run.
    post_and_hang_up(s, c, body, 12, 4);
    EXPECT_TRUE(s.kv_freed());
    for (std::int64_t id = 0; id < 4; ++id)
      EXPECT_EQ(s.finish_reason(id), FinishReason::Cancelled) << "choice " << id << " stream " << stream;
  }
}

// What the admission queue can never hold at once is a 400 naming prompt, not a 429 to retry;
// a list of text prompts without a tokenizer names the prompt.
TEST_F(ApiBatchTest, BoundsAndPerPromptErrors) {
  CoordinatorOptions co;
  co.max_waiting_requests = 4;
  co.max_waiting_tokens = 12;
  LiveServer s(weights_, co);
  auto c = s.client();
  using Prompts = std::vector<std::vector<std::int32_t>>;
  json e = post(c, {{"prompt", Prompts{{1}, {2}, {3}, {4}, {5}}}, {"max_tokens", 2}}, 400)["error"];
  EXPECT_EQ(e["param"], "prompt");
  EXPECT_NE(e["message"].get<std::string>().find("5 choices (prompts × n), more than the server admits at once "
                                                 "(--max-waiting-requests 4)"),
            std::string::npos)
      << e;
  e = post(c, {{"prompt", Prompts{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12, 13}}}, {"max_tokens", 2}}, 400)["error"];
  EXPECT_EQ(e["param"], "prompt");
  EXPECT_NE(e["message"].get<std::string>().find("13 prompt tokens together"), std::string::npos) << e;
  e = post(c, {{"prompt", Prompts{{1}, {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}}}, {"max_tokens", 2}}, 400)["error"];
  EXPECT_EQ(e["param"], "prompt[1]");
  EXPECT_NE(e["message"].get<std::string>().find("--max-waiting-tokens 12"), std::string::npos) << e;
  e = post(c, {{"prompt", std::vector<std::string>{"a", "b"}}, {"max_tokens", 2}}, 400)["error"];
  EXPECT_EQ(e["param"], "prompt[0]");
  EXPECT_NE(e["message"].get<std::string>().find("no tokenizer.json"), std::string::npos) << e;
  EXPECT_EQ(post(c, {{"prompt", Prompts{{1, 2}, {3, 4}}}, {"n", 2}, {"max_tokens", 2}}, 200)["choices"].size(), 4u);
  EXPECT_TRUE(s.kv_freed());
}

}  // namespace
}  // namespace sy::http
