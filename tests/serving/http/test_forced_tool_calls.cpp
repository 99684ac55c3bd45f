// Named and required tool choices (forced_tool_calls.h): vLLM's schemas made from the tools, and
// the guided answers read back into calls, arguments written as json.dumps writes them.
#include <gtest/gtest.h>

#include "engine/serving/http/forced_tool_calls.h"

namespace sy::http {
namespace {

using ojson = nlohmann::ordered_json;

TEST(ForcedToolCalls, NamedSchemaIsTheParametersOrAnyObject) {
  const ojson with = ojson::parse(R"({"type":"function","function":{"name":"f","parameters":{"type":"object","required":["a"]}}})");
  EXPECT_EQ(named_tool_schema(with).dump(), R"({"type":"object","required":["a"]})");
  for (const char* none : {R"({"type":"function","function":{"name":"g","parameters":null}})",
                           R"({"type":"function","function":{"name":"g","parameters":{}}})",
                           R"({"type":"function","function":{"name":"g"}})"})
    EXPECT_EQ(named_tool_schema(ojson::parse(none)).dump(), R"({"type":"object"})") << none;
}

TEST(ForcedToolCalls, RequiredSchemaIsVllmsWithDefsGathered) {
  const ojson tools = ojson::parse(R"([
    {"type":"function","function":{"name":"f","parameters":{"$defs":{"pt":{"type":"number"}},"type":"object","properties":{"x":{"$ref":"#/$defs/pt"}}}}},
    {"type":"function","function":{"name":"g","parameters":null}},
    {"type":"function","function":{"name":"h","parameters":{"$defs":{"pt":{"type":"number"}},"type":"object"}}}])");
  auto schema = required_tool_calls_schema(tools);
  ASSERT_TRUE(schema.ok()) << schema.status().message();
  EXPECT_EQ(schema->dump(),
            R"({"type":"array","minItems":1,"items":{"anyOf":[)"
            R"({"type":"object","properties":{"name":{"enum":["f"]},"parameters":{"type":"object","properties":{"x":{"$ref":"#/$defs/pt"}}}},"required":["name","parameters"]},)"
            R"({"type":"object","properties":{"name":{"enum":["g"]},"parameters":{"type":"object","properties":{}}},"required":["name","parameters"]},)"
            R"({"type":"object","properties":{"name":{"enum":["h"]},"parameters":{"type":"object"}},"required":["name","parameters"]}]},)"
            R"("$defs":{"pt":{"type":"number"}}})");
  const ojson conflict = ojson::parse(R"([
    {"type":"function","function":{"name":"f","parameters":{"$defs":{"pt":{"type":"number"}}}}},
    {"type":"function","function":{"name":"g","parameters":{"$defs":{"pt":{"type":"string"}}}}}])");
  auto refused = required_tool_calls_schema(conflict);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "Tool definition 'pt' has multiple schemas, which is not supported.");
}

TEST(ForcedToolCalls, NamedAnswerIsTheArguments) {
  const ToolCallParse p = named_tool_call("get_weather", R"({"city": "Zürich"})");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city": "Zürich"})");
  EXPECT_EQ(p.calls[0].id.rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_EQ(p.content, std::optional<std::string>(""));
}

TEST(ForcedToolCalls, RequiredAnswerIsTheListOfCalls) {
  const ToolCallParse p = required_tool_calls(R"( [{"name":"f","parameters":{"x":1.5,"s":"é"}},
      {"parameters": {}, "name": "g", "extra": true}, {"name": "h"}] )");
  ASSERT_EQ(p.calls.size(), 3u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(p.calls[0].arguments, R"({"x": 1.5, "s": "é"})");  // json.dumps(ensure_ascii=False)
  EXPECT_EQ(p.calls[1].name, "g");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  EXPECT_EQ(p.calls[2].arguments, "null");  // FunctionDefinition's parameters default to None
  EXPECT_NE(p.calls[0].id, p.calls[1].id);
  EXPECT_EQ(p.content, std::optional<std::string>(""));
  // Not such a list (cut by max_tokens, or empty): all content, no call.
  for (const char* text : {R"([{"name":"f","parameters":{"x":)", "[]", R"({"name":"f"})", R"([{"parameters":{}}])", R"([1])"}) {
    const ToolCallParse none = required_tool_calls(text);
    EXPECT_TRUE(none.calls.empty()) << text;
    EXPECT_EQ(none.content, std::optional<std::string>(text));
  }
}

}  // namespace
}  // namespace sy::http
