// The HTTP API end to end with cpp-httplib's client against a cpu deployment serving on its
// own wall-clock loop thread: answers identical to the reference path, streaming, errors,
// overload (429, 503), API keys, and a client that goes away freeing its request's KV pages.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_deployment.h"
#include "engine/model/random_model.h"
#include "engine/reference/reference_session.h"
#include "engine/serving/http/api_server.h"
#include "engine/serving/http/request_broker.h"
#include "tests/serving/http/live_server.h"

namespace sy::http {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

class ApiServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("sy_test_http_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 1, dir_).ok());
    weights_ = *ModelWeights::load(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::vector<std::int32_t> reference(const std::vector<std::int32_t>& prompt, std::int32_t n) {
    ReferenceSession session(weights_, static_cast<std::int32_t>(prompt.size()) + n);
    GenerateOptions g;
    g.max_new_tokens = n;
    g.eos_token_id = weights_->config().eos_token_id;
    return *generate(session, prompt, g);
  }
  static json post(httplib::Client& c, const std::string& path, const json& body, int expect_status) {
    auto res = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    EXPECT_EQ(res->status, expect_status) << res->body;
    return json::parse(res->body);
  }

  static inline fs::path dir_;
  static inline std::shared_ptr<const ModelWeights> weights_;
};

TEST_F(ApiServerTest, HealthModelsMetricsAndUnknownPaths) {
  LiveServer s(weights_, {});
  auto c = s.client();
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  const json m = json::parse(models->body);
  EXPECT_EQ(m["data"][0]["id"], "tiny");
  EXPECT_EQ(m["data"][0]["max_model_len"], weights_->config().max_position_embeddings);
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("switchyard_test_total 3"), std::string::npos) << metrics->body;
  auto missing = c.Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(json::parse(missing->body)["error"]["message"].get<std::string>().find("/v1/nothing"), std::string::npos);
}

TEST_F(ApiServerTest, GreedyCompletionMatchesTheReferencePath) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const std::vector<std::int32_t> prompt = {5, 17, 42, 99, 3};
  const json r = post(c, "/v1/completions", {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}},
                      200);
  const auto expected = reference(prompt, 12);
  EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<std::int32_t>>(), expected);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(r["usage"]["completion_tokens"], expected.size());
  EXPECT_EQ(r["usage"]["total_tokens"], 5 + expected.size());
  EXPECT_EQ(r["choices"][0]["finish_reason"], expected.size() == 12 ? "length" : "stop");
}

// min_p and OpenAI's penalties reach the sampler as the reference path applies them: the same
// seed gives the same tokens. A negative frequency penalty makes the answer repeat tokens, where
// the presence and frequency terms differ (each token once, they only add up): swapped, the
// two give other tokens.
TEST_F(ApiServerTest, MinPAndPenaltiesSampleAsTheReferencePath) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const std::vector<std::int32_t> prompt = {5, 17, 42, 99, 3};
  auto reference_with = [&](float presence, float frequency) {
    ReferenceSession session(weights_, static_cast<std::int32_t>(prompt.size()) + 12);
    GenerateOptions g;
    g.max_new_tokens = 12;
    g.sampling = {0.9f, 1.0f, 0, 0.05f};
    g.seed = 7;
    g.penalties = {presence, frequency, 1.0f};
    return *generate(session, prompt, g);
  };
  auto answer_with = [&](double presence, double frequency) {
    const json r = post(c, "/v1/completions",
                        {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0.9}, {"seed", 7}, {"min_p", 0.05},
                         {"presence_penalty", presence}, {"frequency_penalty", frequency}, {"ignore_eos", true}},
                        200);
    return r["choices"][0]["token_ids"].get<std::vector<std::int32_t>>();
  };
  const std::vector<std::int32_t> got = answer_with(0.5, -2.0);
  EXPECT_EQ(got, reference_with(0.5f, -2.0f));
  EXPECT_NE(got, reference_with(-2.0f, 0.5f)) << "presence and frequency swapped give the same tokens: the test cannot tell";
  EXPECT_EQ(answer_with(1.5, 0.0), reference_with(1.5f, 0.0f));
  // vLLM's repetition penalty, on the prompt's tokens too.
  ReferenceSession session(weights_, static_cast<std::int32_t>(prompt.size()) + 12);
  GenerateOptions g;
  g.max_new_tokens = 12;
  g.penalties.repetition = 3.0f;
  const json rep = post(c, "/v1/completions",
                        {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"repetition_penalty", 3.0},
                         {"ignore_eos", true}},
                        200);
  EXPECT_EQ(rep["choices"][0]["token_ids"].get<std::vector<std::int32_t>>(), *generate(session, prompt, g));
  // OpenAI's logit_bias: -100 bans the greedy answer's first token, +100 on another makes it
  // every greedy token; a bias and a penalty on one token, as the reference adds them.
  const std::vector<std::int32_t> greedy = reference(prompt, 12);
  const std::int32_t favoured = greedy[0] == 7 ? 8 : 7;
  auto biased = [&](const json& bias, double presence) {
    const json r = post(c, "/v1/completions",
                        {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}, {"logit_bias", bias},
                         {"presence_penalty", presence}, {"ignore_eos", true}},
                        200);
    return r["choices"][0]["token_ids"].get<std::vector<std::int32_t>>();
  };
  const std::vector<std::int32_t> banned = biased({{std::to_string(greedy[0]), -100}}, 0.0);
  EXPECT_NE(banned[0], greedy[0]);
  EXPECT_EQ(biased({{std::to_string(favoured), 100}}, 0.0), std::vector<std::int32_t>(6, favoured));
  ReferenceSession both(weights_, static_cast<std::int32_t>(prompt.size()) + 6);
  GenerateOptions b;
  b.max_new_tokens = 6;
  b.logit_bias = {{favoured, 3.0f}, {greedy[0], -2.0f}};
  b.penalties.presence = 2.0f;
  EXPECT_EQ(biased({{std::to_string(favoured), 3.0}, {std::to_string(greedy[0]), -2.0}}, 2.0), *generate(both, prompt, b));
}

TEST_F(ApiServerTest, StreamingSendsOneEventPerTokenAndEndsWithDone) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const std::vector<std::int32_t> prompt = {7, 8, 9};
  const json body = {{"prompt", prompt}, {"max_tokens", 10}, {"temperature", 0}, {"stream", true}, {"ignore_eos", true}};
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  // Every event is framed, a data event (or a keep-alive), and one [DONE] is the last.
  const SseEvents sse = parse_sse(res->body);
  EXPECT_EQ(sse.tail, "");
  EXPECT_EQ(sse.other, 0);
  EXPECT_EQ(sse.done, 1);
  ASSERT_FALSE(sse.raw.empty());
  EXPECT_EQ(sse.raw.back(), "data: [DONE]");
  ASSERT_FALSE(sse.data.empty());
  std::vector<std::int32_t> ids;
  for (const json& chunk : sse.data)
    for (auto id : chunk["choices"][0]["token_ids"]) ids.push_back(id.get<std::int32_t>());
  json last = sse.data.back();  // a copy, so that a missing key reads null
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(last["usage"]["completion_tokens"], 10);
  ReferenceSession session(weights_, 13);
  GenerateOptions g;
  g.max_new_tokens = 10;
  EXPECT_EQ(ids, *generate(session, prompt, g));
}

// n choices: each its own request, sampled with seed + i, so choice i is what n = 1 with seed + i
// answers; one body with every choice, or their chunks interleaved, each with its index, and one
// [DONE]; usage counts the prompt once and every choice's tokens.
TEST_F(ApiServerTest, NChoicesAreSampledWithSeedPlusTheirIndex) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const std::vector<std::int32_t> prompt = {11, 12, 13};
  const json base = {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 1.0}, {"ignore_eos", true}};
  std::vector<std::vector<std::int32_t>> single;
  for (int i = 0; i < 3; ++i) {
    json body = base;
    body["seed"] = 40 + i;
    single.push_back(post(c, "/v1/completions", body, 200)["choices"][0]["token_ids"].get<std::vector<std::int32_t>>());
  }
  ASSERT_NE(single[0], single[1]) << "sampling at temperature 1 should differ between seeds";
  json body = base;
  body["seed"] = 40;
  body["n"] = 3;
  const json r = post(c, "/v1/completions", body, 200);
  ASSERT_EQ(r["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["token_ids"].get<std::vector<std::int32_t>>(), single[static_cast<std::size_t>(i)]);
    EXPECT_EQ(r["choices"][i]["finish_reason"], "length");
  }
  EXPECT_EQ(r["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(r["usage"]["completion_tokens"], 24);

  // Greedy: every choice is the reference continuation.
  const json greedy = post(c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}, {"n", 2}}, 200);
  const auto expected = reference(prompt, 6);
  for (const json& choice : greedy["choices"]) EXPECT_EQ(choice["token_ids"].get<std::vector<std::int32_t>>(), expected);

  // Streamed: the same tokens per index, each choice's last chunk with its finish reason, usage
  // on the answer's last chunk.
  body["stream"] = true;
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  const SseEvents sse = parse_sse(res->body);
  ASSERT_EQ(sse.tail, "");
  EXPECT_EQ(sse.other, 0);  // every event a JSON data event, [DONE] or a keep-alive
  ASSERT_FALSE(sse.data.empty());
  std::map<int, std::vector<std::int32_t>> streamed;
  std::map<int, int> finishes;
  for (const json& chunk : sse.data) {
    const json& choice = chunk["choices"][0];
    for (auto id : choice["token_ids"]) streamed[choice["index"].get<int>()].push_back(id.get<std::int32_t>());
    if (!choice["finish_reason"].is_null()) ++finishes[choice["index"].get<int>()];
  }
  json last = sse.data.back();  // a copy, so that a missing key reads null
  EXPECT_EQ(sse.done, 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(streamed[i], single[static_cast<std::size_t>(i)]) << "choice " << i;
    EXPECT_EQ(finishes[i], 1) << "choice " << i;
  }
  EXPECT_EQ(last["usage"]["completion_tokens"], 24);

  // Each choice's text_offset counts its own text from 0, whole and streamed (they ran on
  // across the choices).
  json asked = base;
  asked["seed"] = 40;
  asked["n"] = 2;
  asked["logprobs"] = 1;
  const json with_logprobs = post(c, "/v1/completions", asked, 200);
  std::vector<std::vector<std::int64_t>> offsets;
  for (const json& choice : with_logprobs["choices"]) {
    std::vector<std::int64_t> o = choice["logprobs"]["text_offset"].get<std::vector<std::int64_t>>();
    ASSERT_EQ(o.size(), 8u);
    EXPECT_EQ(o[0], 0);
    for (std::size_t i = 1; i < o.size(); ++i) EXPECT_GE(o[i], o[i - 1]);
    offsets.push_back(std::move(o));
  }
  asked["stream"] = true;
  auto streamed_logprobs = c.Post("/v1/completions", asked.dump(), "application/json");
  ASSERT_TRUE(streamed_logprobs);
  std::map<int, std::vector<std::int64_t>> streamed_offsets;
  const SseEvents with_offsets = parse_sse(streamed_logprobs->body);
  ASSERT_EQ(with_offsets.tail, "");
  for (const json& chunk : with_offsets.data) {
    if (chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    if (choice["logprobs"].is_null()) continue;
    for (auto o : choice["logprobs"]["text_offset"]) streamed_offsets[choice["index"].get<int>()].push_back(o.get<std::int64_t>());
  }
  EXPECT_EQ(streamed_offsets[0], offsets[0]);
  EXPECT_EQ(streamed_offsets[1], offsets[1]);
  EXPECT_TRUE(s.kv_freed());
}

TEST_F(ApiServerTest, AClientThatLeavesFreesEveryChoicesKv) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const json body = {{"prompt", {1, 2, 3}}, {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true}, {"n", 3}};
  int events = 0;
  post_streaming(c, body.dump(), [&](const char* data, std::size_t n) {
    for (std::size_t i = 0; i + 1 < n; ++i) events += data[i] == '\n' && data[i + 1] == '\n';
    return events < 9;  // then hang up
  });
  EXPECT_TRUE(s.kv_freed());
  for (std::int64_t id = 0; id < 3; ++id) EXPECT_EQ(s.finish_reason(id), FinishReason::Cancelled) << "choice " << id;
}

// --prefix-caching: a prompt served before shares its cached pages; usage says how many prompt
// tokens came from the cache (OpenAI's prompt_tokens_details.cached_tokens), and the tokens are
// the same. Without it usage has no such field.
TEST_F(ApiServerTest, PrefixCachingReportsCachedPromptTokens) {
  CoordinatorOptions co;
  co.prefix_caching = true;
  LiveServer s(weights_, co);
  auto c = s.client();
  std::vector<std::int32_t> prompt;
  for (std::int32_t i = 0; i < 40; ++i) prompt.push_back(3 + i * 7 % 200);
  const json body = {{"prompt", prompt}, {"max_tokens", 5}, {"temperature", 0}};
  const json first = post(c, "/v1/completions", body, 200);
  const json second = post(c, "/v1/completions", body, 200);
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"], 32);  // two whole pages of 16
  EXPECT_EQ(second["choices"][0]["token_ids"], first["choices"][0]["token_ids"]);
  EXPECT_EQ(first["choices"][0]["token_ids"].get<std::vector<std::int32_t>>(), reference(prompt, 5));
  const json state = s.control({{"cmd", "get_state"}})["state"]["kv"]["prefix_cache"];
  EXPECT_EQ(state["enabled"], true);
  EXPECT_EQ(state["queries"], 80);
  EXPECT_EQ(state["hits"], 32);
  EXPECT_TRUE(s.kv_freed());

  LiveServer plain(weights_, {});
  auto p = plain.client();
  EXPECT_FALSE(post(p, "/v1/completions", body, 200)["usage"].contains("prompt_tokens_details"));
}

TEST_F(ApiServerTest, BadRequestsAre400sNamingTheField) {
  LiveServer s(weights_, {});
  auto c = s.client();
  auto res = c.Post("/v1/completions", "{\"prompt\": [1,", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  const json e = json::parse(res->body)["error"];
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_NE(e["message"].get<std::string>().find("not valid JSON"), std::string::npos);
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", {1}}, {"max_tokens", -1}}, 400)["error"]["param"], "max_tokens");
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", {1}}, {"top_p", "x"}}, 400)["error"]["param"], "top_p");
  std::vector<std::int32_t> too_long(static_cast<std::size_t>(weights_->config().max_position_embeddings), 1);
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", too_long}}, 400)["error"]["param"], "prompt");
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", {1}}, {"model", "gpt-4"}}, 404)["error"]["code"], "model_not_found");
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", {1}}, {"logprobs", 21}}, 400)["error"]["param"], "logprobs");
  // A seed beyond int64 is out of range, not clamped to its top (which made every such seed one).
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", {1}}, {"seed", 18446744073709551615ull}}, 400)["error"]["param"],
            "seed");
  // A POST the HTTP library refuses or that carries nothing still gets OpenAI's error shape.
  for (int with_type = 0; with_type < 2; ++with_type) {
    auto empty = with_type ? c.Post("/v1/completions", "", "application/json") : c.Post("/v1/completions");
    ASSERT_TRUE(empty);
    EXPECT_EQ(empty->status, 400);
    EXPECT_EQ(json::parse(empty->body, nullptr, false)["error"]["type"], "invalid_request_error") << empty->body;
  }
  // The server is still serving.
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", {1, 2}}, {"max_tokens", 2}}, 200)["usage"]["completion_tokens"], 2);
}

TEST_F(ApiServerTest, AFullQueueIs429AndPausedAdmissionIs503) {
  CoordinatorOptions co;
  co.max_batch_per_rank = 1;
  co.max_waiting_requests = 1;
  LiveServer s(weights_, co);
  // One long request runs, a second waits; a third finds the queue full.
  const json long_body = {{"prompt", {1, 2, 3}}, {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true}};
  std::atomic<bool> stop{false};
  auto stream = [&] {
    auto c = s.client();
    post_streaming(c, long_body.dump(), [&](const char*, std::size_t) { return !stop.load(); });
  };
  std::thread running(stream);
  while (s.on_loop([&] { return s.coordinator().open_requests(); }) < 1) std::this_thread::sleep_for(1ms);
  std::thread waiting(stream);
  while (s.on_loop([&] { return s.coordinator().waiting_requests(); }) < 1) std::this_thread::sleep_for(1ms);
  auto c = s.client();
  const json full = post(c, "/v1/completions", {{"prompt", {4}}, {"max_tokens", 2}}, 429);
  EXPECT_EQ(full["error"]["code"], "queue_full");
  stop = true;
  running.join();
  waiting.join();
  EXPECT_TRUE(s.kv_freed());

  s.on_loop([&] {
    s.coordinator().set_admission_paused(true);
    return 0;
  });
  const json paused = post(c, "/v1/completions", {{"prompt", {4}}, {"max_tokens", 2}}, 503);
  EXPECT_EQ(paused["error"]["code"], "paused");
}

// A prompt longer than the admission queue's token bound could never be admitted: a 400 naming
// the bound, not a 429 that the OpenAI client would retry for ever.
TEST_F(ApiServerTest, APromptBeyondTheQueuesTokenBoundIs400) {
  CoordinatorOptions co;
  co.max_waiting_tokens = 4;
  LiveServer s(weights_, co);
  auto c = s.client();
  const json e = post(c, "/v1/completions", {{"prompt", {1, 2, 3, 4, 5}}, {"max_tokens", 2}}, 400)["error"];
  EXPECT_EQ(e["param"], "prompt");
  EXPECT_NE(e["message"].get<std::string>().find("--max-waiting-tokens 4"), std::string::npos) << e;
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", {1, 2, 3, 4}}, {"max_tokens", 2}}, 200)["usage"]["completion_tokens"],
            2);
}

TEST_F(ApiServerTest, AClientThatLeavesMidStreamFreesItsKv) {
  LiveServer s(weights_, {});
  auto c = s.client();
  const json body = {{"prompt", {1, 2, 3}}, {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true}};
  int events = 0;
  std::int64_t pages_while_running = 0;
  auto res = post_streaming(c, body.dump(), [&](const char* data, std::size_t n) {
                      for (std::size_t i = 0; i + 1 < n; ++i) events += data[i] == '\n' && data[i + 1] == '\n';
                      if (events < 5) return true;
                      pages_while_running = s.kv_pages_used();
                      return false;  // hang up
                    });
  EXPECT_GT(pages_while_running, 0);
  EXPECT_TRUE(s.kv_freed());
  EXPECT_EQ(s.finish_reason(0), FinishReason::Cancelled);
}

TEST_F(ApiServerTest, AClientThatGivesUpOnAWholeAnswerFreesItsKv) {
  LiveServer s(weights_, {});
  httplib::Client c = s.client();
  const json body = {{"prompt", {1, 2, 3}}, {"max_tokens", 2000}, {"ignore_eos", true}};
  // The client hangs up once the request runs, long before its 2000 tokens are made.
  std::thread give_up([&] {
    while (s.on_loop([&] { return s.coordinator().open_requests(); }) < 1) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);
    c.stop();
  });
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  give_up.join();
  EXPECT_FALSE(res);
  EXPECT_TRUE(s.kv_freed());
  EXPECT_EQ(s.finish_reason(0), FinishReason::Cancelled);
}

// An answer's id names its run and its first request, so that ids stay unique across
// restarts (a new run id) and each leads to its request in that run's trace.
TEST_F(ApiServerTest, AnswerIdsNameTheRunAndTheRequest) {
  ApiServerOptions o;
  o.run_id = 4577106710453261913ull;
  LiveServer s(weights_, {}, o);
  auto c = s.client();
  const json body = {{"prompt", {1, 2}}, {"max_tokens", 1}};
  const std::string first = post(c, "/v1/completions", body, 200)["id"];
  const std::string second = post(c, "/v1/completions", body, 200)["id"];
  const std::string prefix = "cmpl-4577106710453261913-";
  ASSERT_EQ(first.rfind(prefix, 0), 0u) << first;
  ASSERT_EQ(second.rfind(prefix, 0), 0u) << second;
  EXPECT_EQ(std::stoll(second.substr(prefix.size())), std::stoll(first.substr(prefix.size())) + 1);
  // Without a run id of its own the server draws one: two servers' first answers differ.
  LiveServer other(weights_, {});
  auto other_client = other.client();
  const std::string elsewhere = post(other_client, "/v1/completions", body, 200)["id"];
  EXPECT_EQ(elsewhere.rfind("cmpl-", 0), 0u);
  EXPECT_EQ(elsewhere.find(prefix), std::string::npos) << elsewhere;
}

TEST_F(ApiServerTest, AnApiKeyGuardsTheApiButNotHealth) {
  ApiServerOptions o;
  o.api_key = "sesame";
  LiveServer s(weights_, {}, o);
  auto c = s.client();
  const json denied = post(c, "/v1/completions", {{"prompt", {1}}, {"max_tokens", 1}}, 401);
  EXPECT_EQ(denied["error"]["code"], "invalid_api_key");
  c.set_bearer_token_auth("wrong!");
  auto wrong = c.Get("/v1/models");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  c.set_bearer_token_auth("sesame");
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", {1}}, {"max_tokens", 1}}, 200)["usage"]["completion_tokens"], 1);
  auto health = s.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(ApiServerTest, BeyondLoopbackNeedsAKeyOrInsecure) {
  DeploymentOptions d;
  d.clock = Clock::Wall;
  CpuDeployment deployment(weights_, Topology::colocated(weights_->config(), 1), d);
  RequestBroker broker(deployment);
  ApiServerOptions o;
  o.host = "0.0.0.0";
  o.port = 0;
  auto refused = ApiServer::start(o, broker);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--api-key"), std::string::npos);
  o.api_key = "k";
  EXPECT_TRUE(ApiServer::start(o, broker).ok());
}

}  // namespace
}  // namespace sy::http
