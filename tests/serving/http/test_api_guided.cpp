// Guided decoding (structured output) end to end: the tiny random-weight model, sampled at
// temperature 1, can only write valid JSON if the token mask works, so every answer that ends
// (finish_reason "stop") must parse and follow its schema; the same prompts unguided do not.
// Also json_object, choice, and the refusal of a server without a tokenizer.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/model/random_model.h"
#include "engine/text/model_tokenizer.h"
#include "tests/serving/http/live_server.h"
#include "tests/serving/http/tiny_text_model.h"

namespace sy::http {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ApiGuidedTest : public TinyTextModelSuite<ApiGuidedTest> {
 protected:
  static void SetUpTestSuite() { ASSERT_NO_FATAL_FAILURE(set_up_model(Arch::Mixtral, "guided")); }
  static json post(httplib::Client& c, const std::string& path, const json& body, int status = 200) {
    auto res = c.Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, status) << res->body;
    return json::parse(res->body);
  }
  // The choices' (text, finish_reason) of a completions request with n choices.
  static std::vector<std::pair<std::string, std::string>> answers(httplib::Client& c, json body) {
    const json r = post(c, "/v1/completions", body);
    std::vector<std::pair<std::string, std::string>> out;
    for (const json& ch : r["choices"]) out.emplace_back(ch["text"].get<std::string>(), ch["finish_reason"].get<std::string>());
    return out;
  }

};

const char* kSchema = R"({"type":"object","properties":{
  "name":{"type":"string","maxLength":6},
  "age":{"type":"integer"},
  "ok":{"type":"boolean"},
  "color":{"enum":["red","green",null]},
  "tags":{"type":"array","items":{"type":"string","maxLength":3},"maxItems":2}},
  "required":["name","age","ok","color"],"additionalProperties":false})";

// kSchema's rules, checked on a parsed value.
bool follows_schema(const json& v) {
  if (!v.is_object()) return false;
  for (const char* key : {"name", "age", "ok", "color"})
    if (!v.contains(key)) return false;
  for (const auto& [key, value] : v.items()) {
    if (key == "name") {
      if (!value.is_string()) return false;
    } else if (key == "age") {
      if (!value.is_number_integer()) return false;
    } else if (key == "ok") {
      if (!value.is_boolean()) return false;
    } else if (key == "color") {
      if (!(value == "red" || value == "green" || value.is_null())) return false;
    } else if (key == "tags") {
      if (!value.is_array() || value.size() > 2) return false;
      for (const json& t : value)
        if (!t.is_string()) return false;
    } else {
      return false;
    }
  }
  return true;
}

std::optional<json> parse(const std::string& text) {
  json v = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return std::nullopt;
  return v;
}

TEST_F(ApiGuidedTest, SchemaAnswersParseAndValidate) {
  LiveServer server(weights_, CoordinatorOptions{}, {}, text_);
  httplib::Client c = server.client();
  c.set_read_timeout(120, 0);
  int stopped = 0, total = 0;
  for (int seed = 0; seed < 4; ++seed) {
    const json body = {{"prompt", "Describe a person as JSON:"}, {"max_tokens", 400}, {"temperature", 1.0},
                       {"seed", seed * 16},  {"n", 16}, {"structured_outputs", {{"json", json::parse(kSchema)}}}};
    for (const auto& [text, reason] : answers(c, body)) {
      ++total;
      if (reason != "stop") continue;  // cut by max_tokens: a prefix of valid JSON, not checked whole
      ++stopped;
      const auto v = parse(text);
      ASSERT_TRUE(v) << "not JSON: " << text;
      EXPECT_TRUE(follows_schema(*v)) << text;
    }
  }
  std::printf("[guided] %d of %d answers ended by eos, all valid\n", stopped, total);
  EXPECT_GE(stopped, total / 4) << "too few answers ended: the check above saw too little";
  // Unguided, the same random model writes no such JSON: the check above has teeth.
  int unguided_valid = 0;
  const json free_body = {{"prompt", "Describe a person as JSON:"}, {"max_tokens", 60}, {"temperature", 1.0},
                          {"seed", 0}, {"n", 16}};
  for (const auto& [text, reason] : answers(c, free_body)) {
    const auto v = parse(text);
    unguided_valid += v && follows_schema(*v) ? 1 : 0;
  }
  EXPECT_EQ(unguided_valid, 0);
  EXPECT_TRUE(server.kv_freed());
}

TEST_F(ApiGuidedTest, JsonObjectOnChat) {
  LiveServer server(weights_, CoordinatorOptions{}, {}, text_);
  httplib::Client c = server.client();
  c.set_read_timeout(120, 0);
  int stopped = 0;
  for (int seed = 0; seed < 4; ++seed) {
    const json body = {{"messages", {{{"role", "user"}, {"content", "JSON please"}}}},
                       {"max_tokens", 80},
                       {"temperature", 1.0},
                       {"seed", seed * 8},
                       {"n", 8},
                       {"response_format", {{"type", "json_object"}}}};
    const json r = post(c, "/v1/chat/completions", body);
    for (const json& ch : r["choices"]) {
      if (ch["finish_reason"] != "stop") continue;
      ++stopped;
      const std::string text = ch["message"]["content"].get<std::string>();
      const auto v = parse(text);
      ASSERT_TRUE(v) << "not JSON: " << text;
      EXPECT_TRUE(v->is_object()) << text;
    }
  }
  EXPECT_GT(stopped, 0);
}

TEST_F(ApiGuidedTest, ChoiceIsExactlyOneOfThem) {
  LiveServer server(weights_, CoordinatorOptions{}, {}, text_);
  httplib::Client c = server.client();
  const std::set<std::string> choices = {"positive", "negative", "neutral"};
  const json body = {{"prompt", "Sentiment:"},
                     {"max_tokens", 30},
                     {"temperature", 1.0},
                     {"seed", 3},
                     {"n", 16},
                     {"structured_outputs", {{"choice", {"positive", "negative", "neutral"}}}}};
  std::set<std::string> seen;
  for (const auto& [text, reason] : answers(c, body)) {
    EXPECT_EQ(reason, "stop") << text;
    EXPECT_TRUE(choices.contains(text)) << "'" << text << "'";
    seen.insert(text);
  }
  EXPECT_GE(seen.size(), 2u) << "temperature 1 over three choices";
  // Streamed too: the chunks join to one of the choices.
  json streamed = body;
  streamed["stream"] = true;
  streamed["n"] = 1;
  auto res = c.Post("/v1/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(res && res->status == 200);
  std::string text;
  for (const json& chunk : parse_sse(res->body).data)
    if (!chunk["choices"].empty()) text += chunk["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(choices.contains(text)) << "'" << text << "'";
}

TEST_F(ApiGuidedTest, RefusedWithoutTokenizerAndOnBadSchemas) {
  {
    LiveServer server(weights_, CoordinatorOptions{});  // no tokenizer: token ids only
    httplib::Client c = server.client();
    const json r = post(c, "/v1/completions",
                        {{"prompt", {1, 2}}, {"structured_outputs", {{"choice", {"a", "b"}}}}}, 400);
    EXPECT_EQ(r["error"]["param"], "structured_outputs");
    EXPECT_NE(r["error"]["message"].get<std::string>().find("tokenizer"), std::string::npos) << r.dump();
    // The server keeps serving.
    post(c, "/v1/completions", {{"prompt", {1, 2}}, {"max_tokens", 2}});
  }
  LiveServer server(weights_, CoordinatorOptions{}, {}, text_);
  httplib::Client c = server.client();
  const json r = post(c, "/v1/chat/completions",
                      {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                       {"response_format",
                        {{"type", "json_schema"},
                         {"json_schema", {{"name", "n"}, {"schema", {{"type", "string"}, {"minLength", 2}, {"pattern", "x"}}}}}}}},
                      400);
  EXPECT_EQ(r["error"]["param"], "response_format.json_schema.schema");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("'pattern'"), std::string::npos) << r.dump();
  post(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}});
}

}  // namespace
}  // namespace sy::http
