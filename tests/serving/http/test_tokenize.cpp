// POST /tokenize and /detokenize: the ids and text Hugging Face's tokenizers give for the golden
// tokenizers (tests/golden/data/tokenizers), chat messages tokenized as a chat completion runs
// them, and the errors, the model check and the API key as for the rest of the API.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/json_parse.h"
#include "engine/model/random_model.h"
#include "engine/serving/http/tokenize_handler.h"
#include "engine/text/chat_template.h"
#include "engine/text/model_tokenizer.h"
#include "tests/serving/http/live_server.h"
#include "tests/serving/http/tiny_text_model.h"

namespace sy::http {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ojson = nlohmann::ordered_json;

const fs::path kRoot = SY_SOURCE_DIR;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json answer_of(const TokenizeHandler::Answer& a) {
  if (const ApiError* e = std::get_if<ApiError>(&a)) {
    ADD_FAILURE() << e->message;
    return {};
  }
  return json::parse(std::get<ojson>(a).dump());
}

ApiError error_of(const TokenizeHandler::Answer& a) {
  if (const ApiError* e = std::get_if<ApiError>(&a)) return *e;
  ADD_FAILURE() << "answered " << std::get<ojson>(a).dump();
  return {};
}

class TokenizeGolden : public ::testing::TestWithParam<std::string> {};

// The endpoint's ids and text against what HF's tokenizers gave for the golden texts, with and
// without special tokens, and the vocabulary pieces for token_strs.
TEST_P(TokenizeGolden, IdsAndTextAreHuggingFaces) {
  const fs::path golden_dir = kRoot / "tests" / "golden" / "data" / "tokenizers" / GetParam();
  auto data = parse_json(slurp(golden_dir / "golden.json"));
  ASSERT_TRUE(data.ok()) << data.status().message();
  const fs::path model = fs::temp_directory_path() / ("sy_test_tokenize_" + GetParam() + std::to_string(::getpid()));
  fs::remove_all(model);
  fs::create_directories(model);
  fs::copy_file(kRoot / data->at("tokenizer_dir").get<std::string>() / "tokenizer.json", model / "tokenizer.json");
  fs::copy_file(golden_dir / "tokenizer_config.json", model / "tokenizer_config.json");
  auto text = TextSupport::load(model);
  fs::remove_all(model);
  ASSERT_TRUE(text.ok()) << text.status().message();
  const std::int32_t vocab = data->at("vocab_size").get<std::int32_t>();
  const TokenizeHandler handler({"m", 4096, vocab, std::nullopt}, *text);
  int cases = 0;
  for (const auto& c : data->at("cases")) {
    const auto special = c["ids_special"].get<std::vector<std::int32_t>>();
    json r = answer_of(handler.tokenize(json{{"prompt", c["text"]}}.dump()));
    EXPECT_EQ(r["tokens"].get<std::vector<std::int32_t>>(), special) << c["text"];
    EXPECT_EQ(r["count"], special.size());
    EXPECT_EQ(r["max_model_len"], 4096);
    EXPECT_TRUE(r["token_strs"].is_null());
    r = answer_of(handler.tokenize(json{{"prompt", c["text"]}, {"add_special_tokens", false}}.dump()));
    EXPECT_EQ(r["tokens"].get<std::vector<std::int32_t>>(), c["ids"].get<std::vector<std::int32_t>>()) << c["text"];
    r = answer_of(handler.detokenize(json{{"tokens", special}}.dump()));
    EXPECT_EQ(r["prompt"], c["decoded"]) << c["text"];  // special tokens kept, as vLLM's decode
    ++cases;
  }
  EXPECT_GT(cases, 50);
  // token_strs: the vocabulary's pieces, which map back to the same ids.
  const json r = answer_of(handler.tokenize(R"({"prompt": "Hello world, again", "return_token_strs": true})"));
  ASSERT_EQ(r["token_strs"].size(), r["tokens"].size());
  for (std::size_t i = 0; i < r["tokens"].size(); ++i)
    EXPECT_EQ(text->tokenizer()->token_to_id(r["token_strs"][i].get<std::string>()), r["tokens"][i].get<std::int32_t>());
}

INSTANTIATE_TEST_SUITE_P(Goldens, TokenizeGolden, ::testing::Values("qwen2", "llama"));

TEST(Tokenize, ErrorsNameTheField) {
  const TextSupport no_text;
  const TokenizeHandler handler({"m", 64, 100, std::nullopt}, no_text);
  const auto param = [&](const TokenizeHandler::Answer& a) { return error_of(a).param; };
  EXPECT_EQ(param(handler.tokenize("{}")), "prompt");
  EXPECT_EQ(param(handler.tokenize("[1]")), "");
  EXPECT_EQ(param(handler.tokenize("{")), "");
  EXPECT_EQ(param(handler.tokenize(R"({"prompt": "a", "messages": []})")), "prompt");
  EXPECT_EQ(param(handler.tokenize(R"({"prompt": [1, 2]})")), "prompt");
  EXPECT_EQ(param(handler.tokenize(R"({"prompt": "a", "add_special_tokens": 1})")), "add_special_tokens");
  EXPECT_EQ(param(handler.tokenize(R"({"prompt": "a", "return_token_strs": "yes"})")), "return_token_strs");
  EXPECT_EQ(param(handler.tokenize(R"({"prompt": "a", "chat_template": "{{ 1 }}"})")), "chat_template");
  // vLLM's rule: continuing the final message excludes the generation prompt (its default true).
  EXPECT_EQ(param(handler.tokenize(R"({"messages": [{"role": "user", "content": "a"}], "continue_final_message": true})")),
            "continue_final_message");
  EXPECT_EQ(param(handler.tokenize(R"({"prompt": "a", "continue_final_message": true, "add_generation_prompt": false})")),
            "continue_final_message");
  // No tokenizer: said, naming the field.
  const ApiError e = error_of(handler.tokenize(R"({"prompt": "a"})"));
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("tokenizer.json"), std::string::npos) << e.message;
  EXPECT_EQ(param(handler.tokenize(R"({"messages": [{"role": "user", "content": "a"}]})")), "messages");
  EXPECT_EQ(param(handler.tokenize(R"({"messages": [{"content": "a"}]})")), "messages[0].role");
  EXPECT_EQ(param(handler.detokenize("{}")), "tokens");
  EXPECT_EQ(param(handler.detokenize(R"({"tokens": 3})")), "tokens");
  EXPECT_EQ(param(handler.detokenize(R"({"tokens": [1, 100]})")), "tokens[1]");
  EXPECT_EQ(param(handler.detokenize(R"({"tokens": [1, -1]})")), "tokens[1]");
  EXPECT_EQ(param(handler.detokenize(R"({"tokens": [1.5]})")), "tokens[0]");
  EXPECT_EQ(param(handler.detokenize(R"({"tokens": [1]})")), "tokens");  // no tokenizer
  const ApiError other = error_of(handler.detokenize(R"({"model": "other", "tokens": [1]})"));
  EXPECT_EQ(other.status, 404);
  EXPECT_EQ(other.code, "model_not_found");
}

class TokenizeApiTest : public TinyTextModelSuite<TokenizeApiTest> {
 protected:
  static void SetUpTestSuite() {
    ASSERT_NO_FATAL_FAILURE(set_up_model(Arch::Qwen3Moe, "tokenize"));
    ASSERT_TRUE(text_->chat()) << text_->no_chat_reason();
  }
  static json post(httplib::Client& c, const std::string& path, const json& body, int status = 200) {
    auto res = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, status) << path << " " << res->body;
    return json::parse(res->body);
  }

};

// Chat messages tokenize to the prompt a chat completion runs on (its usage counts the same
// tokens), and the template rendered without the generation prompt gives fewer.
TEST_F(TokenizeApiTest, ChatMessagesTokenizeAsAChatCompletionRunsThem) {
  LiveServer s(weights_, {}, {}, text_);
  auto c = s.client();
  const json messages = json::array({{{"role", "system"}, {"content", "Be brief."}},
                                     {{"role", "user"}, {"content", "What is 2 + 2?"}}});
  const json r = post(c, "/tokenize", {{"model", "tiny"}, {"messages", messages}});
  const json chat = post(c, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}});
  EXPECT_EQ(r["count"], chat["usage"]["prompt_tokens"]);
  auto tmpl = text::ChatTemplate::load(dir_);
  ASSERT_TRUE(tmpl.ok());
  for (const bool generation : {true, false}) {
    const auto rendered = tmpl->render(json{{"messages", messages},
                                            {"add_generation_prompt", generation},
                                            {"bos_token", text_->tokenizer()->bos_token()},
                                            {"eos_token", text_->tokenizer()->eos_token()}});
    ASSERT_TRUE(rendered.ok()) << rendered.status().message();
    const json t = post(c, "/tokenize", {{"messages", messages}, {"add_generation_prompt", generation}});
    EXPECT_EQ(t["tokens"].get<std::vector<std::int32_t>>(), text_->tokenizer()->encode(*rendered, false)) << generation;
  }
  EXPECT_EQ(r["max_model_len"], weights_->config().max_position_embeddings);

  // An assistant reply the client began: rendered without the generation prompt and cut right
  // after it (transformers' continue_final_message), so the model continues it; a chat
  // completion runs on the same ids.
  json begun = messages;
  begun.push_back({{"role", "assistant"}, {"content", "The answer is"}});
  const auto whole = tmpl->render(json{{"messages", begun},
                                       {"add_generation_prompt", false},
                                       {"bos_token", text_->tokenizer()->bos_token()},
                                       {"eos_token", text_->tokenizer()->eos_token()}});
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  const std::size_t end = whole->rfind("The answer is");
  ASSERT_NE(end, std::string::npos) << *whole;
  const std::string cut = whole->substr(0, end + std::string("The answer is").size());
  ASSERT_LT(cut.size(), whole->size()) << "the template closes the message: there is something to cut";
  const json cont = post(c, "/tokenize", {{"messages", begun}, {"add_generation_prompt", false},
                                          {"continue_final_message", true}});
  EXPECT_EQ(cont["tokens"].get<std::vector<std::int32_t>>(), text_->tokenizer()->encode(cut, false)) << cut;
  const json continued = post(c, "/v1/chat/completions", {{"messages", begun}, {"max_tokens", 1},
                                                          {"add_generation_prompt", false},
                                                          {"continue_final_message", true}});
  EXPECT_EQ(continued["usage"]["prompt_tokens"], cont["count"]);
  const json both = post(c, "/v1/chat/completions", {{"messages", begun}, {"continue_final_message", true}}, 400);
  EXPECT_EQ(both["error"]["param"], "continue_final_message");
  // And back: the rendered prompt, special tokens and all.
  const json d = post(c, "/detokenize", {{"tokens", r["tokens"]}});
  EXPECT_EQ(d["prompt"], text_->tokenizer()->decode(r["tokens"].get<std::vector<std::int32_t>>(), false));
  EXPECT_NE(d["prompt"].get<std::string>().find("What is 2 + 2?"), std::string::npos) << d["prompt"];
  // A completion's text prompt: the ids the completion counts.
  const json p = post(c, "/tokenize", {{"prompt", "Hello there"}});
  const json done = post(c, "/v1/completions", {{"prompt", "Hello there"}, {"max_tokens", 1}});
  EXPECT_EQ(p["count"], done["usage"]["prompt_tokens"]);
  // Errors have OpenAI's shape.
  const json e = post(c, "/detokenize", {{"tokens", {1, -5}}}, 400);
  EXPECT_EQ(e["error"]["param"], "tokens[1]");
  post(c, "/tokenize", {{"model", "other"}, {"prompt", "a"}}, 404);
}

TEST_F(TokenizeApiTest, TheApiKeyGuardsThem) {
  ApiServerOptions o;
  o.api_key = "sesame";
  LiveServer s(weights_, {}, o, text_);
  auto c = s.client();
  post(c, "/tokenize", {{"prompt", "a"}}, 401);
  post(c, "/detokenize", {{"tokens", {1}}}, 401);
  c.set_bearer_token_auth("sesame");
  post(c, "/tokenize", {{"prompt", "a"}});
  post(c, "/detokenize", {{"tokens", {1}}});
}

}  // namespace
}  // namespace sy::http
