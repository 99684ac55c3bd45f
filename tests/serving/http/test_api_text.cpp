// The HTTP API with text: a model made with its family's tokenizer and chat template answers
// string prompts and chat messages with the tokens of the reference path and their text,
// streams the same text it answers whole, and ends at a stop string (freeing the request); a list
// of text prompts answers each as alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/model/random_model.h"
#include "engine/reference/reference_session.h"
#include "engine/text/chat_template.h"
#include "engine/text/model_tokenizer.h"
#include "engine/text/tokenizer.h"
#include "tests/serving/http/live_server.h"
#include "tests/serving/http/tiny_text_model.h"

namespace sy::http {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ApiTextTest : public TinyTextModelSuite<ApiTextTest> {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(set_up_model(Arch::Mixtral, "text"));
    ASSERT_TRUE(text_->tokenizer());
  }

  static std::vector<std::int32_t> reference(const std::vector<std::int32_t>& prompt, std::int32_t n) {
    ReferenceSession session(weights_, static_cast<std::int32_t>(prompt.size()) + n);
    GenerateOptions g;
    g.max_new_tokens = n;
    g.eos_token_id = text_->eos_token_id();
    return *generate(session, prompt, g);
  }
  static json post(httplib::Client& c, const std::string& path, const json& body) {
    auto res = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, 200) << res->body;
    return json::parse(res->body);
  }
  // The text of a streamed answer, and its finish reason.
  static std::pair<std::string, std::string> streamed(httplib::Client& c, const std::string& path, json body) {
    body["stream"] = true;
    auto res = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res && res->status == 200);
    if (!res) return {};
    std::string text, reason;
    for (const json& chunk : parse_sse(res->body).data) {
      if (chunk["choices"].empty()) continue;
      const json& choice = chunk["choices"][0];
      if (choice.contains("text")) text += choice["text"].get<std::string>();
      if (choice.contains("delta") && choice["delta"].contains("content"))
        text += choice["delta"]["content"].get<std::string>();
      if (!choice["finish_reason"].is_null()) reason = choice["finish_reason"];
    }
    return {text, reason};
  }

};

TEST_F(ApiTextTest, TextPromptsAnswerTheReferenceTokensAndTheirText) {
  LiveServer s(weights_, {}, {}, text_);
  auto c = s.client();
  const std::string prompt = "Hello, wörld! 😀";
  const json body = {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}};
  const json r = post(c, "/v1/completions", body);
  const auto ids = text_->tokenizer()->encode(prompt, true);
  const auto expected = reference(ids, 12);
  EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<std::int32_t>>(), expected);
  EXPECT_EQ(r["usage"]["prompt_tokens"], ids.size());
  const std::string text = r["choices"][0]["text"];
  EXPECT_EQ(text, text_->tokenizer()->decode(expected, /*skip_special_tokens=*/true));
  const auto [streamed_text, reason] = streamed(c, "/v1/completions", body);
  EXPECT_EQ(streamed_text, text);
  EXPECT_EQ(reason, r["choices"][0]["finish_reason"]);
}

TEST_F(ApiTextTest, ChatGoesThroughTheTemplate) {
  if (!text_->chat()) GTEST_SKIP() << text_->no_chat_reason();
  LiveServer s(weights_, {}, {}, text_);
  auto c = s.client();
  const json messages = json::array({{{"role", "user"}, {"content", "Hi there"}}});
  const json body = {{"messages", messages}, {"max_tokens", 10}, {"temperature", 0}};
  const json r = post(c, "/v1/chat/completions", body);
  auto tmpl = text::ChatTemplate::load(dir_);
  ASSERT_TRUE(tmpl.ok());
  const auto rendered = tmpl->render(json{{"messages", messages},
                                          {"add_generation_prompt", true},
                                          {"bos_token", text_->tokenizer()->bos_token()},
                                          {"eos_token", text_->tokenizer()->eos_token()}});
  ASSERT_TRUE(rendered.ok());
  const auto expected = reference(text_->tokenizer()->encode(*rendered, false), 10);
  EXPECT_EQ(r["choices"][0]["token_ids"].get<std::vector<std::int32_t>>(), expected);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["id"].get<std::string>().rfind("chatcmpl-", 0), 0u) << r["id"];
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  const std::string content = r["choices"][0]["message"]["content"];
  EXPECT_EQ(content, text_->tokenizer()->decode(expected, true));
  EXPECT_EQ(streamed(c, "/v1/chat/completions", body).first, content);
}

TEST_F(ApiTextTest, AStopStringEndsTheAnswerBeforeItAndFreesTheRequest) {
  LiveServer s(weights_, {}, {}, text_);
  auto c = s.client();
  json body = {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}};
  const std::string full = post(c, "/v1/completions", body)["choices"][0]["text"];
  ASSERT_GT(full.size(), 12u) << full;
  // A stop string from the middle of the greedy answer, whole characters.
  const auto boundary = [&](std::size_t i) {
    while (i < full.size() && (static_cast<unsigned char>(full[i]) & 0xC0) == 0x80) ++i;
    return i;
  };
  const std::size_t from = boundary(full.size() / 2);
  const std::string stop = full.substr(from, boundary(from + 3) - from);
  const std::string before = full.substr(0, full.find(stop));
  body["stop"] = stop;
  const json r = post(c, "/v1/completions", body);
  EXPECT_EQ(r["choices"][0]["text"], before);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(r["usage"]["completion_tokens"].get<int>(), 40);
  const auto [text, reason] = streamed(c, "/v1/completions", body);
  EXPECT_EQ(text, before);
  EXPECT_EQ(reason, "stop");
  EXPECT_TRUE(s.kv_freed());
}

// A tokenizer with a token beyond config.json's vocab_size (an added token here): a prompt that
// uses it is a 400 naming the token, not a read past the embedding table; other prompts serve.
TEST_F(ApiTextTest, ATokenBeyondTheModelsVocabularyIsRefusedByName) {
  const fs::path dir = dir_.string() + "_beyond";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(dir_)) fs::copy(f.path(), dir / f.path().filename());
  json tok = json::parse(std::ifstream(dir / "tokenizer.json"));
  const std::int32_t beyond = weights_->config().vocab_size + 100;
  tok["added_tokens"].push_back({{"id", beyond}, {"content", "<|beyond|>"}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", true}});
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  auto text = TextSupport::load(dir);
  ASSERT_TRUE(text.ok()) << text.status().message();
  LiveServer s(weights_, {}, {}, &*text);
  auto c = s.client();
  auto res = c.Post("/v1/completions", json{{"prompt", "hello <|beyond|>"}, {"max_tokens", 2}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_NE(json::parse(res->body)["error"]["message"].get<std::string>().find(
                "encodes to token " + std::to_string(beyond) + " ('<|beyond|>'), which the model does not have"),
            std::string::npos)
      << res->body;
  EXPECT_EQ(post(c, "/v1/completions", {{"prompt", "hello"}, {"max_tokens", 2}})["usage"]["completion_tokens"], 2);
  fs::remove_all(dir);
}

// A list of text prompts: each choice echoes its own prompt as written and ends at the stop
// string as that prompt alone does; streamed, the text per index is the whole answer's.
TEST_F(ApiTextTest, AListOfTextPromptsAnswersEachAsAlone) {
  LiveServer s(weights_, {}, {}, text_);
  auto c = s.client();
  const std::vector<std::string> prompts = {"Hello, wörld! 😀", "Once upon a time", "x"};
  json body = {{"max_tokens", 20}, {"temperature", 0}, {"ignore_eos", true}, {"echo", true}};
  // A stop string from the middle of the second prompt's greedy answer.
  json one = body;
  one["prompt"] = prompts[1];
  one["echo"] = false;
  const std::string full = post(c, "/v1/completions", one)["choices"][0]["text"];
  ASSERT_GT(full.size(), 8u) << full;
  std::size_t from = full.size() / 2;
  while (from < full.size() && (static_cast<unsigned char>(full[from]) & 0xC0) == 0x80) ++from;
  std::size_t to = from + 2;
  while (to < full.size() && (static_cast<unsigned char>(full[to]) & 0xC0) == 0x80) ++to;
  body["stop"] = full.substr(from, to - from);

  body["prompt"] = prompts;
  const json batch = post(c, "/v1/completions", body);
  ASSERT_EQ(batch["choices"].size(), prompts.size());
  std::int64_t prompt_tokens = 0;
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    one = body;
    one["prompt"] = prompts[p];
    const json single = post(c, "/v1/completions", one);
    const json& choice = batch["choices"][p];
    EXPECT_EQ(choice["index"], p);
    EXPECT_EQ(choice["text"], single["choices"][0]["text"]) << "prompt " << p;
    EXPECT_EQ(choice["text"].get<std::string>().rfind(prompts[p], 0), 0u) << "echoes its own prompt: " << choice["text"];
    EXPECT_EQ(choice["finish_reason"], single["choices"][0]["finish_reason"]) << "prompt " << p;
    prompt_tokens += single["usage"]["prompt_tokens"].get<std::int64_t>();
  }
  EXPECT_EQ(batch["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(batch["usage"]["prompt_tokens"], prompt_tokens);

  body["stream"] = true;
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  std::map<int, std::string> texts;
  for (const json& chunk : parse_sse(res->body).data)
    for (const json& choice : chunk["choices"]) texts[choice["index"].get<int>()] += choice["text"].get<std::string>();
  ASSERT_EQ(texts.size(), prompts.size());
  for (const auto& [index, text] : texts) EXPECT_EQ(text, batch["choices"][static_cast<std::size_t>(index)]["text"]);
  EXPECT_TRUE(s.kv_freed());
}

}  // namespace
}  // namespace sy::http
