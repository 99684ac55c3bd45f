// Tool calling over HTTP (serve --enable-auto-tool-choice --tool-call-parser hermes) on a tiny
// qwen3_moe model, and chat requests with tools rendered as vLLM renders them (goldens of
// jinja2 over vLLM's context, tools/make_chat_template_goldens.py). A random model writes no tool call on its own, so its tokenizer gets added
// tokens that decode to a call (or a broken one) and logit_bias makes the model write them:
// the engine's real generation, detokenisation, parsing and answer shapes, whole and streamed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/model/random_model.h"
#include "engine/text/chat_template.h"
#include "engine/text/model_tokenizer.h"
#include "tests/serving/http/live_server.h"
#include "tests/serving/http/tiny_text_model.h"

namespace sy::http {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ojson = nlohmann::ordered_json;

// Added tokens (ids past the small Qwen tokenizer's 512) and what they decode to.
constexpr int kCallToken = 512;      // content, then a whole call
constexpr int kBrokenToken = 513;    // a call whose JSON is cut short
constexpr int kOpenCallToken = 514;  // a call without its closing tag
constexpr int kCallListToken = 515;  // a whole answer to tool_choice "required"
const std::string kCallText =
    "Let me see. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": 2}}\n</tool_call>";
const std::string kBrokenText = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \n</tool_call>";
const std::string kOpenCallText = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1.5}}";
const std::string kCallListText =
    R"([{"name": "pick", "parameters": {"color":"green"}}, {"parameters": {"level": 2, "on": false}, "name": "switch"}])";

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}}])");

class ApiToolsTest : public TinyTextModelSuite<ApiToolsTest> {
 protected:
  static void SetUpTestSuite() {
    // Room for the added tokens, each a whole answer the tests make the model write.
    const auto room = [](ModelConfig& c) { c.vocab_size = 520; };
    const auto add_tokens = [](const fs::path& dir) {
      json tok = json::parse(std::ifstream(dir / "tokenizer.json"));
      for (const auto& [id, content] :
           {std::pair{kCallToken, kCallText}, {kBrokenToken, kBrokenText}, {kOpenCallToken, kOpenCallText},
            {kCallListToken, kCallListText}})
        tok["added_tokens"].push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                                       {"rstrip", false}, {"normalized", false}, {"special", false}});
      std::ofstream(dir / "tokenizer.json") << tok.dump();
    };
    ASSERT_NO_FATAL_FAILURE(set_up_model(Arch::Qwen3Moe, "tools", room, add_tokens));
    ASSERT_TRUE(text_->chat()) << text_->no_chat_reason();
  }
  static ApiServerOptions options(bool auto_tool_choice) {
    ApiServerOptions o;
    o.model.auto_tool_choice = auto_tool_choice;
    return o;
  }
  // A chat request that makes the model write `token` `max_tokens` times.
  static json forced(int token, int max_tokens, int n = 1) {
    return {{"messages", {{{"role", "user"}, {"content", "Weather in Zürich?"}}}},
            {"tools", kTools},
            {"max_tokens", max_tokens},
            {"temperature", 0},
            {"n", n},
            {"logit_bias", {{std::to_string(token), 100}}}};
  }
  static httplib::Result post(httplib::Client& c, const json& body) {
    return c.Post("/v1/chat/completions", body.dump(), "application/json");
  }
  static json whole(httplib::Client& c, const json& body) {
    auto res = post(c, body);
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
    return res ? json::parse(res->body) : json();
  }
  // A streamed answer assembled as the openai client does: per choice index, the content and the
  // tool calls (by their index: id, type and name from the first delta, arguments appended).
  struct Assembled {
    std::string content;
    json tool_calls = json::array();
    std::string finish_reason;
    std::vector<std::int32_t> token_ids;
  };
  static std::map<int, Assembled> streamed(httplib::Client& c, json body) {
    body["stream"] = true;
    auto res = post(c, body);
    EXPECT_TRUE(res && res->status == 200);
    std::map<int, Assembled> out;
    if (!res) return out;
    for (const json& chunk : parse_sse(res->body).data) {
      for (const json& choice : chunk["choices"]) {
        Assembled& a = out[choice["index"].get<int>()];
        const json& delta = choice["delta"];
        if (delta.contains("content") && delta["content"].is_string()) a.content += delta["content"].get<std::string>();
        for (const json& t : delta.value("tool_calls", json::array())) {
          const std::size_t k = t["index"];
          if (k == a.tool_calls.size()) a.tool_calls.push_back({{"function", {{"arguments", ""}}}});
          EXPECT_LT(k, a.tool_calls.size()) << "calls come in order";
          json& call = a.tool_calls[k];
          if (t.contains("id")) call["id"] = t["id"];
          if (t.contains("type")) call["type"] = t["type"];
          if (t["function"].contains("name")) call["function"]["name"] = t["function"]["name"];
          if (t["function"].contains("arguments"))
            call["function"]["arguments"] = call["function"]["arguments"].get<std::string>() +
                                            t["function"]["arguments"].get<std::string>();
        }
        for (const auto& id : choice.value("token_ids", json::array())) a.token_ids.push_back(id.get<std::int32_t>());
        if (!choice["finish_reason"].is_null()) a.finish_reason = choice["finish_reason"];
      }
    }
    return out;
  }
  // A call without its random id.
  static json without_id(json call) {
    EXPECT_TRUE(std::regex_match(call["id"].get<std::string>(), std::regex("chatcmpl-tool-[0-9a-f]{32}"))) << call;
    call.erase("id");
    return call;
  }

};

const json kWeatherCall = {{"type", "function"},
                           {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Zürich\", \"days\": 2}"}}}};

TEST_F(ApiToolsTest, CallsAreParsedWholeAndStreamedAlike) {
  LiveServer s(weights_, {}, options(true), text_);
  auto c = s.client();
  const json body = forced(kCallToken, 2);
  const json r = whole(c, body);
  const json& choice = r["choices"][0];
  EXPECT_EQ(choice["token_ids"], json({kCallToken, kCallToken}));
  EXPECT_EQ(choice["finish_reason"], "tool_calls");  // vLLM's: calls were made (here max_tokens ended it)
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["message"]["content"], "Let me see. ");  // before the first call; between the calls dropped
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 2u) << r.dump();
  EXPECT_EQ(without_id(choice["message"]["tool_calls"][0]), kWeatherCall);
  EXPECT_EQ(without_id(choice["message"]["tool_calls"][1]), kWeatherCall);
  EXPECT_NE(choice["message"]["tool_calls"][0]["id"], choice["message"]["tool_calls"][1]["id"]);

  const auto stream = streamed(c, body);
  ASSERT_EQ(stream.size(), 1u);
  const Assembled& a = stream.at(0);
  EXPECT_EQ(a.content, "Let me see. ");
  EXPECT_EQ(a.finish_reason, "tool_calls");
  EXPECT_EQ(a.token_ids, (std::vector<std::int32_t>{kCallToken, kCallToken}));
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(without_id(a.tool_calls[0]), kWeatherCall);
  EXPECT_EQ(without_id(a.tool_calls[1]), kWeatherCall);
  EXPECT_TRUE(s.kv_freed());
}

TEST_F(ApiToolsTest, EachChoiceIsParsedOnItsOwnAndAnUnterminatedCallCounts) {
  LiveServer s(weights_, {}, options(true), text_);
  auto c = s.client();
  // One token: the call's closing tag never comes (max_tokens), and the call still counts, as vLLM's regex reads it.
  const json body = forced(kOpenCallToken, 1, 2);
  const json r = whole(c, body);
  ASSERT_EQ(r["choices"].size(), 2u);
  const json add = {{"type", "function"}, {"function", {{"name", "add"}, {"arguments", "{\"a\": 1.5}"}}}};
  for (const json& choice : r["choices"]) {
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    EXPECT_TRUE(choice["message"]["content"].is_null()) << "nothing before the call: null, as vLLM";
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
    EXPECT_EQ(without_id(choice["message"]["tool_calls"][0]), add);
  }
  const auto stream = streamed(c, body);
  ASSERT_EQ(stream.size(), 2u);
  for (const auto& [index, a] : stream) {
    EXPECT_EQ(a.content, "") << index;
    EXPECT_EQ(a.finish_reason, "tool_calls");
    ASSERT_EQ(a.tool_calls.size(), 1u);
    EXPECT_EQ(without_id(a.tool_calls[0]), add);
  }
}

TEST_F(ApiToolsTest, BrokenCallsAndToolChoiceNoneLeaveTheText) {
  LiveServer s(weights_, {}, options(true), text_);
  auto c = s.client();
  // A call whose JSON does not parse: everything is content, as vLLM answers.
  json body = forced(kBrokenToken, 2);
  json r = whole(c, body);
  EXPECT_EQ(r["choices"][0]["message"]["content"], kBrokenText + kBrokenText);
  EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  auto stream = streamed(c, body);
  EXPECT_EQ(stream.at(0).content, kBrokenText + kBrokenText);
  EXPECT_TRUE(stream.at(0).tool_calls.empty());
  EXPECT_EQ(stream.at(0).finish_reason, "length");
  // tool_choice "none": the tools are rendered, the text is not parsed.
  body = forced(kCallToken, 1);
  body["tool_choice"] = "none";
  r = whole(c, body);
  EXPECT_EQ(r["choices"][0]["message"]["content"], kCallText);
  EXPECT_FALSE(r["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  stream = streamed(c, body);
  EXPECT_EQ(stream.at(0).content, kCallText);
  EXPECT_TRUE(stream.at(0).tool_calls.empty());
}

TEST_F(ApiToolsTest, ToolsReachTheTemplateAndAutoNeedsTheServerFlag) {
  LiveServer s(weights_, {}, options(false), text_);
  auto c = s.client();
  json body = forced(kCallToken, 1);
  // Without --enable-auto-tool-choice, tools default to tool_choice "auto": vLLM's 400.
  auto res = post(c, body);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  const json e = json::parse(res->body)["error"];
  EXPECT_EQ(e["param"], "tool_choice");
  EXPECT_EQ(e["message"], "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set");
  // "none" renders them: the prompt is the template's with the tools as vLLM passes them (the
  // add tool's absent description as null), written here by hand.
  body["tool_choice"] = "none";
  const json r = whole(c, body);
  const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "description": null, "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}}])");
  auto tmpl = text::ChatTemplate::load(dir_);
  ASSERT_TRUE(tmpl.ok());
  const auto rendered = tmpl->render(ojson{{"messages", {{{"role", "user"}, {"content", "Weather in Zürich?"}}}},
                                           {"tools", tools},
                                           {"add_generation_prompt", true},
                                           {"bos_token", ""},
                                           {"eos_token", "<|im_end|>"}});
  ASSERT_TRUE(rendered.ok()) << rendered.status().message();
  EXPECT_NE(rendered->find("{\"type\": \"function\", \"function\": {\"name\": \"add\", \"description\": null, "), std::string::npos)
      << *rendered;
  EXPECT_EQ(r["usage"]["prompt_tokens"], text_->tokenizer()->encode(*rendered, false).size());
  // Without tools the prompt is shorter: they were rendered.
  body.erase("tools");
  body.erase("tool_choice");
  EXPECT_LT(whole(c, body)["usage"]["prompt_tokens"].get<int>(), r["usage"]["prompt_tokens"].get<int>());
}

// tool_choice naming a function or "required" (no --enable-auto-tool-choice needed, as vLLM): the
// random model, sampled at temperature 1, writes valid calls only because guided decoding holds
// it to the tools' schemas, so every choice that ends (finish_reason "stop", which a call does
// not change here) must carry calls whose arguments follow them; content is "".
const json kSwitchTool = json::parse(R"({"type": "function", "function": {"name": "switch", "parameters": {"type": "object",
    "properties": {"on": {"type": "boolean"}, "level": {"enum": [1, 2, 3]}}, "required": ["on", "level"], "additionalProperties": false}}})");
const json kPickTool = json::parse(R"({"type": "function", "function": {"name": "pick", "parameters": {"type": "object",
    "properties": {"color": {"enum": ["red", "green"]}}, "required": ["color"], "additionalProperties": false}}})");

// Whether `arguments` (JSON text) follow the named tool's parameters above.
bool follows_tool(const std::string& name, const std::string& arguments) {
  const json a = json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  if (!a.is_object()) return false;
  if (name == "switch")
    return a.size() == 2 && a.contains("on") && a["on"].is_boolean() && a.contains("level") &&
           (a["level"] == 1 || a["level"] == 2 || a["level"] == 3);
  if (name == "pick") return a.size() == 1 && a.contains("color") && (a["color"] == "red" || a["color"] == "green");
  return false;
}

TEST_F(ApiToolsTest, NamedAndRequiredToolChoicesAnswerWithGuidedCalls) {
  LiveServer s(weights_, {}, options(false), text_);
  auto c = s.client();
  c.set_read_timeout(120, 0);
  json body = {{"messages", {{{"role", "user"}, {"content", "Lights on, and pick a color."}}}},
               {"tools", json::array({kTools[0], kSwitchTool, kPickTool})},
               {"max_tokens", 400},  // room for the up to 20 bytes of whitespace a gap may take
               {"temperature", 1.0},
               {"seed", 3},
               {"n", 8}};
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "switch"}}}};
  int ended = 0;
  const json named = whole(c, body);  // a named value: the loop must not walk a destroyed temporary
  for (const json& choice : named["choices"]) {
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice.dump();
    const json& call = choice["message"]["tool_calls"][0];
    EXPECT_EQ(call["function"]["name"], "switch");
    EXPECT_EQ(choice["message"]["content"], "");
    if (choice["finish_reason"] != "stop") {
      EXPECT_EQ(choice["finish_reason"], "length");
      continue;
    }
    ++ended;
    EXPECT_TRUE(follows_tool("switch", call["function"]["arguments"])) << call.dump();
  }
  EXPECT_GE(ended, 4) << "too few calls ended for the check to see them";
  for (const auto& [index, a] : streamed(c, body)) {
    EXPECT_EQ(a.content, "") << index;
    ASSERT_EQ(a.tool_calls.size(), 1u) << index;
    EXPECT_EQ(a.tool_calls[0]["function"]["name"], "switch");
    if (a.finish_reason == "stop") {
      EXPECT_TRUE(follows_tool("switch", a.tool_calls[0]["function"]["arguments"]));
    }
  }

  // "required": the random model would wander among the extra properties vLLM's schema allows
  // an item, so logit_bias makes it write one whole answer in one added token, which the mask
  // must let through (max_tokens 1: greedy sampling would pad the end with the whitespace the
  // grammar allows after the list).
  body = forced(kCallListToken, 1, 2);
  body["tools"] = json::array({kSwitchTool, kPickTool});
  body["tool_choice"] = "required";
  const json pick = {{"type", "function"}, {"function", {{"name", "pick"}, {"arguments", "{\"color\": \"green\"}"}}}};
  const json flip = {{"type", "function"}, {"function", {{"name", "switch"}, {"arguments", "{\"level\": 2, \"on\": false}"}}}};
  const json required = whole(c, body);
  ASSERT_EQ(required["choices"].size(), 2u);
  for (const json& choice : required["choices"]) {
    EXPECT_EQ(choice["finish_reason"], "length");  // the generation's reason: calls do not make it "tool_calls"
    EXPECT_EQ(choice["token_ids"], json({kCallListToken}));
    EXPECT_EQ(choice["message"]["content"], "");
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 2u) << choice.dump();
    EXPECT_EQ(without_id(choice["message"]["tool_calls"][0]), pick);
    EXPECT_EQ(without_id(choice["message"]["tool_calls"][1]), flip);
  }
  for (const auto& [index, a] : streamed(c, body)) {
    EXPECT_EQ(a.content, "") << index;
    EXPECT_EQ(a.finish_reason, "length");
    ASSERT_EQ(a.tool_calls.size(), 2u) << index;
    EXPECT_EQ(without_id(a.tool_calls[0]), pick);
    EXPECT_EQ(without_id(a.tool_calls[1]), flip);
  }
  // The same token under "auto" is no call (the hermes parser finds no tag): guided decoding,
  // not the text, made the calls above.
  body.erase("tool_choice");
  LiveServer with_auto(weights_, {}, options(true), text_);
  auto c2 = with_auto.client();
  const json unforced = whole(c2, body);
  EXPECT_FALSE(unforced["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(unforced["choices"][0]["finish_reason"], "length");
  body["tool_choice"] = "required";
  // With response_format as well: two constraints, one answer: refused.
  body["response_format"] = {{"type", "json_object"}};
  auto res = post(c, body);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"]["param"], "response_format");
  EXPECT_TRUE(s.kv_freed());
}

// Requests as clients send them (arguments as JSON text, fields in any order, content null,
// text parts) through the server's parsing and the template: the text jinja2 renders from the
// context vLLM builds for them.
TEST(ToolRequestTemplates, RenderAsVllmsContextThroughJinja2) {
  const auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const fs::path root = SY_SOURCE_DIR;
  const ojson g = ojson::parse(read(root / "tests/golden/data/chat_templates/tool_requests.json"));
  ASSERT_GE(g["cases"].size(), 10u);
  ModelLimits limits{"m", 4096, 1000, std::nullopt};
  limits.auto_tool_choice = true;
  for (const ojson& c : g["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto t = text::ChatTemplate::parse(read(root / c["template"].get<std::string>()), c["template"].get<std::string>());
    ASSERT_TRUE(t.ok()) << t.status().message();
    const ParsedRequest p = parse_completion_request(c["request"].dump(), Endpoint::ChatCompletions, limits);
    ASSERT_TRUE(std::holds_alternative<CompletionRequest>(p)) << std::get<ApiError>(p).message;
    const CompletionRequest& r = std::get<CompletionRequest>(p);
    auto out = t->render(TextSupport::chat_context(r.messages, r.tools, "", "<|im_end|>"));
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(*out, c["output"].get<std::string>());
  }
}

}  // namespace
}  // namespace sy::http
