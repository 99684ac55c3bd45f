// The hermes tool-call parser (vLLM's Hermes2ProToolParser rules): whole texts, and the same
// texts streamed in pieces split at every byte, which must send exactly the whole parse's
// content and calls.
#include <gtest/gtest.h>

#include <regex>

#include "engine/serving/http/hermes_tool_parser.h"

namespace sy::http {
namespace {

// A call's name and arguments (ids are random).
std::vector<std::pair<std::string, std::string>> calls_of(const std::vector<ToolCall>& calls) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const ToolCall& c : calls) out.emplace_back(c.name, c.arguments);
  return out;
}

using Calls = std::vector<std::pair<std::string, std::string>>;

// What a stream sends for `text` cut into pieces at `cuts`: the content and the calls.
struct Streamed {
  std::string content;
  std::vector<ToolCall> calls;
};
Streamed stream(std::string_view text, const std::vector<std::size_t>& cuts) {
  HermesToolStream s;
  Streamed out;
  std::size_t from = 0;
  for (std::size_t cut : cuts) {
    out.content += s.push(text.substr(from, cut - from));
    from = cut;
  }
  out.content += s.push(text.substr(from));
  HermesToolStream::End end = s.finish();
  out.content += end.content;
  out.calls = std::move(end.calls);
  return out;
}

// The stream equals the whole parse at every one- and two-cut split.
void expect_stream_matches_whole(const std::string& text) {
  SCOPED_TRACE(text);
  const ToolCallParse whole = parse_hermes_tool_calls(text);
  const std::string content = whole.content.value_or("");
  for (std::size_t i = 0; i <= text.size(); ++i) {
    for (std::size_t j = i; j <= text.size(); j += (text.size() > 40 ? 7 : 1)) {
      const Streamed s = stream(text, {i, j});
      ASSERT_EQ(s.content, content) << "cut at " << i << " and " << j;
      ASSERT_EQ(calls_of(s.calls), calls_of(whole.calls)) << "cut at " << i << " and " << j;
    }
  }
  // Byte by byte.
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < text.size(); ++i) every.push_back(i);
  const Streamed s = stream(text, every);
  EXPECT_EQ(s.content, content);
  EXPECT_EQ(calls_of(s.calls), calls_of(whole.calls));
}

const std::string kQwenCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"unit\": \"celsius\"}}\n</tool_call>";

TEST(HermesToolParser, TextWithoutACallIsAllContent) {
  const ToolCallParse p = parse_hermes_tool_calls("Hello <tool there, </tool_call> no start tag");
  ASSERT_TRUE(p.content);
  EXPECT_EQ(*p.content, "Hello <tool there, </tool_call> no start tag");
  EXPECT_TRUE(p.calls.empty());
}

TEST(HermesToolParser, OneCallAsQwenWritesIt) {
  const ToolCallParse p = parse_hermes_tool_calls(kQwenCall);
  EXPECT_FALSE(p.content);  // nothing before the call: null, as vLLM
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  // Python's json.dumps(ensure_ascii=False): ", " and ": ", the model's key order, UTF-8 as is.
  EXPECT_EQ(p.calls[0].arguments, "{\"city\": \"Zürich\", \"unit\": \"celsius\"}");
  EXPECT_TRUE(std::regex_match(p.calls[0].id, std::regex("chatcmpl-tool-[0-9a-f]{32}")));
}

TEST(HermesToolParser, ContentBeforeTheFirstCallTextBetweenAndAfterDropped) {
  const std::string text = "Let me check.\n" + kQwenCall + "\nand\n" +
                           "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2.5, \"b\": 4, \"c\": [1, {}], \"d\": null}}\n"
                           "</tool_call> trailing";
  const ToolCallParse p = parse_hermes_tool_calls(text);
  ASSERT_TRUE(p.content);
  EXPECT_EQ(*p.content, "Let me check.\n");  // not stripped: vLLM keeps it as written
  EXPECT_EQ(calls_of(p.calls), (Calls{{"get_weather", "{\"city\": \"Zürich\", \"unit\": \"celsius\"}"},
                                      {"add", "{\"a\": 2.5, \"b\": 4, \"c\": [1, {}], \"d\": null}"}}));
  EXPECT_NE(p.calls[0].id, p.calls[1].id);
  expect_stream_matches_whole(text);
}

TEST(HermesToolParser, AnUnterminatedLastCallIsACall) {
  // vLLM's regex' second branch, <tool_call>(.*): generation ended (max_tokens) after the JSON.
  const std::string text = kQwenCall + "<tool_call>{\"name\": \"f\", \"arguments\": \"x\\ty\"}\n";
  const ToolCallParse p = parse_hermes_tool_calls(text);
  EXPECT_EQ(calls_of(p.calls), (Calls{{"get_weather", "{\"city\": \"Zürich\", \"unit\": \"celsius\"}"},
                                      {"f", "\"x\\ty\""}}));
  expect_stream_matches_whole(text);
}

TEST(HermesToolParser, OneInvalidCallMakesEverythingContent) {
  for (const std::string bad : {"<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}</tool_call>",  // JSON cut short
                                "<tool_call>{\"arguments\": {}}</tool_call>",                         // no name
                                "<tool_call>{\"name\": \"f\"}</tool_call>",                           // no arguments
                                "<tool_call>{\"name\": 3, \"arguments\": {}}</tool_call>",            // name not a string
                                "<tool_call>[\"f\"]</tool_call>",                                     // not an object
                                "<tool_call></tool_call>",                                            // empty
                                "<tool_call>{\"name\": \"f\", \"arguments\": {}} extra</tool_call>",  // trailing data
                                "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}"}) {          // unterminated, cut
    SCOPED_TRACE(bad);
    const std::string text = "Sure: " + kQwenCall + bad + " after";
    const ToolCallParse p = parse_hermes_tool_calls(text);
    EXPECT_TRUE(p.calls.empty());
    ASSERT_TRUE(p.content);
    EXPECT_EQ(*p.content, text);
  }
  expect_stream_matches_whole("Sure: " + kQwenCall + "<tool_call>{\"name\": \"f\"}</tool_call> after");
}

TEST(HermesToolParser, DeepNestingIsNotACall) {
  // vLLM's json.loads raises RecursionError near 1000 levels: content. Here past 256.
  const auto call = [](std::size_t depth) {
    return "<tool_call>{\"name\": \"f\", \"arguments\": " + std::string(depth - 1, '[') + std::string(depth - 1, ']') +
           "}</tool_call>";
  };
  EXPECT_EQ(parse_hermes_tool_calls(call(256)).calls.size(), 1u);
  EXPECT_TRUE(parse_hermes_tool_calls(call(257)).calls.empty());
  EXPECT_TRUE(parse_hermes_tool_calls(call(100000)).calls.empty());
}

TEST(HermesToolParser, WhitespaceAroundTheJsonAndANestedStartTag) {
  // json.loads takes whitespace around the value; the first "</tool_call>" ends a call even
  // when another "<tool_call>" came before it (regex non-greedy from the first start tag).
  ToolCallParse p = parse_hermes_tool_calls(" \n<tool_call> \t{\"name\":\"a\",\"arguments\":{}}\r\n </tool_call>");
  EXPECT_EQ(calls_of(p.calls), (Calls{{"a", "{}"}}));
  ASSERT_TRUE(p.content);
  EXPECT_EQ(*p.content, " \n");
  p = parse_hermes_tool_calls("<tool_call>{\"name\": \"a\", \"arguments\": {}}<tool_call></tool_call>");
  EXPECT_TRUE(p.calls.empty());  // the first call's text holds the second start tag: not JSON
}

TEST(HermesToolParser, ArgumentsAreWrittenAsPythonsJsonDumps) {
  const ToolCallParse p = parse_hermes_tool_calls(
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"z\": 1.0, \"a\": 1e3, \"s\": \"q\\\"\\\\\\n\\u0001é\\u00e9\", "
      "\"t\": true, \"n\": -0.5, \"nested\": {\"k\": [true, false]}}}</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  // Keys as the model wrote them (json.loads keeps the order); floats as Python's repr.
  EXPECT_EQ(p.calls[0].arguments,
            "{\"z\": 1.0, \"a\": 1000.0, \"s\": \"q\\\"\\\\\\n\\u0001éé\", \"t\": true, \"n\": -0.5, "
            "\"nested\": {\"k\": [true, false]}}");
}

TEST(HermesToolStream, ContentStreamsAndATagPrefixIsHeldBack) {
  HermesToolStream s;
  EXPECT_EQ(s.push("Hi <"), "Hi ");  // "<" may begin the tag
  EXPECT_EQ(s.push("b>"), "<b>");    // it did not
  EXPECT_EQ(s.push(" x <tool"), " x ");
  EXPECT_EQ(s.push("_ca"), "");
  EXPECT_EQ(s.push("ll>{\"name\": \"f\", \"arguments\": {}}</tool_call>"), "");  // from the tag on: held
  HermesToolStream::End end = s.finish();
  EXPECT_EQ(end.content, "");
  EXPECT_EQ(calls_of(end.calls), (Calls{{"f", "{}"}}));

  HermesToolStream t;  // a tag prefix at the end is content after all
  EXPECT_EQ(t.push("a <tool_c"), "a ");
  end = t.finish();
  EXPECT_EQ(end.content, "<tool_c");
  EXPECT_TRUE(end.calls.empty());
}

TEST(HermesToolStream, EverySplitOfSampleOutputsMatchesTheWholeParse) {
  expect_stream_matches_whole(kQwenCall);
  expect_stream_matches_whole("I'll look it up. " + kQwenCall + "\n" + kQwenCall);
  expect_stream_matches_whole("no calls at all, just < and <tool and </tool_call>");
  expect_stream_matches_whole("<<tool_call>{\"name\": \"x\", \"arguments\": {\"v\": \"<tool_call>\"}}");
  expect_stream_matches_whole("");
}

}  // namespace
}  // namespace sy::http
