// n choices under --prefix-caching: a prompt's choices after its first wait for that one's
// prefill and share its full KV pages (usage's cached_tokens shows them), and answer the same
// texts and tokens as the server without the cache, whole and streamed, also when the first
// choice ends at its first token; a client that leaves cancels them all, and a graceful
// shutdown lets them in.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/serving/http/live_server.h"
#include "tests/serving/http/tiny_text_model.h"

namespace sy::http {
namespace {

using nlohmann::json;

class ApiSharedPromptTest : public TinyTextModelSuite<ApiSharedPromptTest> {
 protected:
  static void SetUpTestSuite() { ASSERT_NO_FATAL_FAILURE(set_up_model(Arch::Mixtral, "shared_prompt")); }

  static CoordinatorOptions caching() {
    CoordinatorOptions co;
    co.prefix_caching = true;
    return co;
  }
  // A prompt of `length` tokens that begins with `first` (prompts of other `first` share no page).
  static std::vector<std::int32_t> prompt(std::int32_t length, std::int32_t first = 3) {
    std::vector<std::int32_t> ids;
    for (std::int32_t i = 0; i < length; ++i) ids.push_back(first + i * 7 % 200);
    return ids;
  }
  static json post(httplib::Client& c, const json& body) {
    auto res = c.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, 200) << res->body;
    return json::parse(res->body);
  }
  // The data events of a streamed answer, parsed, and how many [DONE] ended it.
  static std::vector<json> events(httplib::Client& c, const json& body, int& done) {
    auto res = c.Post("/v1/completions", body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    done = 0;
    if (!res) return {};
    SseEvents sse = parse_sse(res->body);
    done = sse.done;
    return std::move(sse.data);
  }
  // Each choice's text, tokens and finish reason, in order.
  static std::vector<json> choices_of(const json& answer) {
    std::vector<json> out;
    for (const json& c : answer["choices"])
      out.push_back({{"index", c["index"]}, {"text", c["text"]}, {"token_ids", c["token_ids"]},
                     {"finish_reason", c["finish_reason"]}});
    return out;
  }
  static std::int64_t prefix_hits(LiveServer& s) {
    return s.control({{"cmd", "get_state"}})["state"]["kv"]["prefix_cache"]["hits"].get<std::int64_t>();
  }

  // Pages of 16 (LiveServer): a prompt of 70 tokens has 4 full pages (positions 0-63), and the
  // page of its last token (64-69) is always computed, so a choice that follows choice 0
  // shares 64 positions.
  static constexpr std::int32_t kLength = 70;
  static constexpr std::int32_t kShared = 64;
};

// n = 4 on a prompt of several pages: choice 0 finds an empty cache (0), each of the three
// others shares its 4 full pages (64), so cached_tokens is 3 × 64 = 192, and the engine's
// prefix cache counts the same 192 prompt rows not computed. The four texts and their tokens
// are those of the server without prefix caching, greedy and with seeded draws; so are a list
// of two prompts' (each prompt's two later choices share its pages: 2 × 2 × 64).
TEST_F(ApiSharedPromptTest, LaterChoicesShareTheFirstsPromptAndAnswerTheSame) {
  LiveServer cached(weights_, caching(), {}, text_);
  LiveServer plain(weights_, {}, {}, text_);
  auto c = cached.client();
  auto p = plain.client();
  for (const double temperature : {0.0, 1.0}) {
    SCOPED_TRACE(temperature);
    const json body = {{"prompt", prompt(kLength, 3 + static_cast<std::int32_t>(temperature))},
                       {"n", 4},
                       {"max_tokens", 8},
                       {"ignore_eos", true},
                       {"temperature", temperature},
                       {"seed", 40}};
    const std::int64_t hits_before = prefix_hits(cached);
    const json shared = post(c, body);
    const json alone = post(p, body);
    ASSERT_EQ(shared["choices"].size(), 4u);
    EXPECT_EQ(shared["usage"]["prompt_tokens_details"]["cached_tokens"], 3 * kShared);
    EXPECT_EQ(prefix_hits(cached) - hits_before, 3 * kShared);
    EXPECT_EQ(shared["usage"]["prompt_tokens"], kLength);
    EXPECT_EQ(shared["usage"]["completion_tokens"], 4 * 8);
    EXPECT_FALSE(alone["usage"].contains("prompt_tokens_details"));
    EXPECT_EQ(choices_of(shared), choices_of(alone));
    if (temperature > 0) {
      EXPECT_NE(shared["choices"][0]["token_ids"], shared["choices"][1]["token_ids"]) << "seeds differ";
    }
  }
  const json list = {{"prompt", {prompt(kLength, 50), prompt(kLength, 60)}},
                     {"n", 3},
                     {"max_tokens", 6},
                     {"ignore_eos", true},
                     {"temperature", 1.0},
                     {"seed", 7}};
  const json shared = post(c, list);
  ASSERT_EQ(shared["choices"].size(), 6u);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(shared["choices"][k]["index"], k);
  EXPECT_EQ(shared["usage"]["prompt_tokens_details"]["cached_tokens"], 2 * 2 * kShared);
  EXPECT_EQ(choices_of(shared), choices_of(post(p, list)));
  EXPECT_TRUE(cached.kv_freed());
}

// Streamed, n = 3: every index gets its tokens (those of the whole answer) and one finish, and
// one usage comes, at the end, with the two later choices' shared pages.
TEST_F(ApiSharedPromptTest, StreamedChoicesAllArriveWithOneUsage) {
  LiveServer s(weights_, caching(), {}, text_);
  auto c = s.client();
  json body = {{"prompt", prompt(kLength, 9)}, {"n", 3}, {"max_tokens", 6}, {"ignore_eos", true},
               {"temperature", 1.0}, {"seed", 11}};
  const json whole = post(c, body);  // also fills the cache: every choice of the stream shares
  ASSERT_EQ(whole["choices"].size(), 3u);
  EXPECT_EQ(whole["usage"]["prompt_tokens_details"]["cached_tokens"], 2 * kShared);
  for (const bool include_usage : {false, true}) {
    SCOPED_TRACE(include_usage);
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", include_usage}};
    int done = 0;
    const std::vector<json> chunks = events(c, body, done);
    EXPECT_EQ(done, 1);
    std::map<int, std::vector<std::int32_t>> tokens;
    std::map<int, int> finishes;
    std::vector<json> usages;
    for (const json& chunk : chunks) {
      if (chunk.contains("usage") && !chunk["usage"].is_null()) usages.push_back(chunk["usage"]);
      for (const json& choice : chunk["choices"]) {
        const int index = choice["index"].get<int>();
        for (const json& t : choice["token_ids"]) tokens[index].push_back(t.get<std::int32_t>());
        if (!choice["finish_reason"].is_null()) ++finishes[index];
      }
    }
    ASSERT_EQ(tokens.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(tokens[i], whole["choices"][i]["token_ids"].get<std::vector<std::int32_t>>()) << "choice " << i;
      EXPECT_EQ(finishes[i], 1) << "choice " << i;
    }
    ASSERT_EQ(usages.size(), 1u);
    EXPECT_EQ(usages[0], chunks.back().value("usage", json())) << "usage rides on the last chunk";
    EXPECT_EQ(usages[0]["completion_tokens"], 18);
    // The whole answer left the prompt cached: now choice 0 shares it too.
    EXPECT_EQ(usages[0]["prompt_tokens_details"]["cached_tokens"], 3 * kShared);
  }
  EXPECT_TRUE(s.kv_freed());
}

// A choice 0 that ends at its first token (max_tokens 1, a stop token, a stop string) still
// lets the others go on: they share its pages and answer what the server without the cache does.
TEST_F(ApiSharedPromptTest, AFirstChoiceThatEndsAtOnceStillLetsTheOthersFinish) {
  LiveServer cached(weights_, caching(), {}, text_);
  LiveServer plain(weights_, {}, {}, text_);
  auto c = cached.client();
  auto p = plain.client();
  std::int32_t first = 20;
  const json base = {{"n", 4}, {"ignore_eos", true}, {"temperature", 1.0}, {"seed", 5}};

  json one = base;
  one["prompt"] = prompt(kLength, first++);
  one["max_tokens"] = 1;
  const json short_answer = post(c, one);
  ASSERT_EQ(short_answer["choices"].size(), 4u);
  EXPECT_EQ(short_answer["usage"]["prompt_tokens_details"]["cached_tokens"], 3 * kShared);
  EXPECT_EQ(choices_of(short_answer), choices_of(post(p, one)));

  // Choice 0's first token (seed 5), found by asking for it alone.
  json probe = base;
  probe["n"] = 1;
  probe["max_tokens"] = 1;
  json stopped = base;
  stopped["max_tokens"] = 8;

  probe["prompt"] = stopped["prompt"] = prompt(kLength, first++);
  stopped["stop_token_ids"] = post(p, probe)["choices"][0]["token_ids"];
  const json by_token = post(c, stopped);
  ASSERT_EQ(by_token["choices"].size(), 4u);
  EXPECT_EQ(by_token["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(by_token["choices"][0]["token_ids"].size(), 1u);
  EXPECT_EQ(by_token["usage"]["prompt_tokens_details"]["cached_tokens"], 3 * kShared);
  EXPECT_EQ(choices_of(by_token), choices_of(post(p, stopped)));

  // The stop string: the first token's text, when it has one of its own (a piece of a
  // character may not).
  stopped.erase("stop_token_ids");
  for (int tries = 0; tries < 8; ++tries) {
    probe["prompt"] = stopped["prompt"] = prompt(kLength, first++);
    const std::string text = post(p, probe)["choices"][0]["text"].get<std::string>();
    if (text.empty() || text.find('\xEF') != std::string::npos) continue;  // U+FFFD: a partial character
    stopped["stop"] = text;
    break;
  }
  ASSERT_TRUE(stopped.contains("stop")) << "no first token with a text of its own";
  const json by_string = post(c, stopped);
  ASSERT_EQ(by_string["choices"].size(), 4u);
  EXPECT_EQ(by_string["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(by_string["choices"][0]["text"], "");
  EXPECT_EQ(by_string["usage"]["prompt_tokens_details"]["cached_tokens"], 3 * kShared);
  EXPECT_EQ(choices_of(by_string), choices_of(post(p, stopped)));
  EXPECT_TRUE(cached.kv_freed());
  EXPECT_TRUE(plain.kv_freed());
}

// A client that leaves, mid-stream or during a whole answer, cancels the first choice and the
// ones that followed it and frees their KV; what the admission queue could never hold at once
// is still a 400 naming n, counted as if every choice came at once.
TEST_F(ApiSharedPromptTest, AClientThatLeavesCancelsEveryChoiceAndBoundsStay) {
  for (const bool stream : {true, false}) {
    SCOPED_TRACE(stream);
    LiveServer s(weights_, caching(), {}, text_);
    auto c = s.client();
    json body = {{"prompt", prompt(kLength)}, {"max_tokens", 1500}, {"ignore_eos", true}, {"n", 3}};
    if (stream) body["stream"] = true;
    // Streamed, the client hangs up after 9 events; whole, once the later choices run too.
    post_and_hang_up(s, c, body, 9, 3);
    EXPECT_TRUE(s.kv_freed());
    for (std::int64_t id = 0; id < 3; ++id) EXPECT_EQ(s.finish_reason(id), FinishReason::Cancelled) << "choice " << id;
  }

  CoordinatorOptions co = caching();
  co.max_waiting_requests = 2;
  LiveServer s(weights_, co, {}, text_);
  auto c = s.client();
  auto res = c.Post("/v1/completions", json{{"prompt", prompt(kLength)}, {"n", 3}, {"max_tokens", 2}}.dump(),
                    "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "n");
  EXPECT_EQ(post(c, {{"prompt", prompt(kLength)}, {"n", 2}, {"max_tokens", 2}})["choices"].size(), 2u);
  EXPECT_TRUE(s.kv_freed());
}

// A graceful shutdown (the broker draining) refuses new requests but lets in the choices that
// follow an accepted answer's first, which it lets finish; a closed broker refuses them too.
TEST_F(ApiSharedPromptTest, ADrainLetsInTheChoicesThatFollowAnAcceptedFirst) {
  LiveServer s(weights_, caching(), {}, text_);
  const auto spec = [] {
    RequestSpec r;
    r.prompt = prompt(kLength);
    r.max_new_tokens = 2;
    return r;
  };
  s.broker().drain();
  const RequestChannel::News refused = s.broker().submit(spec())->wait_accepted();
  ASSERT_TRUE(refused.error);
  EXPECT_EQ(refused.error->code, "shutting_down");
  const std::shared_ptr<RequestChannel> follower = s.broker().submit(spec(), nullptr, /*follows_accepted=*/true);
  EXPECT_FALSE(follower->wait_accepted().error);
  RequestChannel::News news;
  std::size_t tokens = 0;
  for (int waits = 0; waits < 300 && !news.done(); ++waits) {  // 30 s at most: a failure, not a hang
    news = follower->take(std::chrono::milliseconds(100));
    tokens += news.tokens.size();
  }
  EXPECT_EQ(news.finished, FinishReason::Length);
  EXPECT_EQ(tokens, 2u);
  s.broker().close();
  const RequestChannel::News closed = s.broker().submit(spec(), nullptr, /*follows_accepted=*/true)->wait_accepted();
  ASSERT_TRUE(closed.error);
  EXPECT_EQ(closed.error->code, "shutting_down");
}

}  // namespace
}  // namespace sy::http
