// The schema compiler and byte-level matcher: which texts a schema accepts, where it may end,
// and the errors for what guided decoding does not support.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/structured/matcher.h"
#include "engine/structured/schema_compiler.h"

namespace sy::structured {
namespace {

std::shared_ptr<const Grammar> schema(const char* text) {
  auto g = compile_schema(nlohmann::json::parse(text));
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? *g : nullptr;
}

// Whole: every byte taken and the matcher may end there.
bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  return m.feed(text) && m.accepting();
}
// A prefix: every byte taken (it may or may not end there).
bool prefix(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  return m.feed(text);
}

struct Case {
  const char* text;
  bool whole;
};

void check(const std::shared_ptr<const Grammar>& g, const std::vector<Case>& cases) {
  for (const Case& c : cases) EXPECT_EQ(accepts(g, c.text), c.whole) << c.text;
}

TEST(MatcherTest, AnyObject) {
  const auto g = Grammar::any_object();
  check(g, {{"{}", true},
            {"{\"a\":1}", true},
            {" { \"a\" : [1, 2.5e-3, true, null, \"x\\n\\u00e9\"], \"b\": {\"c\": {}} } ", true},
            {"[]", false},
            {"1", false},
            {"\"s\"", false},
            {"{\"a\":}", false},
            {"{\"a\":1,}", false},
            {"{\"a\":01}", false},
            {"{\"a\":-}", false},
            {"{\"a\":\"\\x\"}", false},
            {"{\"a\":\"\\ud800\"}", false},  // a lone surrogate escape
            {"{\"a\":\"\xc3\xa9\"}", true},
            {"{\"a\":\"\xc3\"}", false},     // a cut UTF-8 character
            {"{\"a\":\"\xed\xa0\x80\"}", false},  // an encoded surrogate
            {"{\"a\":tru}", false},
            {"{\"a\":1} x", false}});
  EXPECT_TRUE(prefix(g, "{\"a\": [1, {\"b\": \"c"));
  EXPECT_FALSE(prefix(g, "x"));
}

TEST(MatcherTest, WhitespaceIsBounded) {
  const auto g = Grammar::any_object();
  EXPECT_TRUE(accepts(g, "{" + std::string(kMaxWhitespace, ' ') + "}"));
  EXPECT_FALSE(prefix(g, "{" + std::string(kMaxWhitespace + 1, ' ')));
  EXPECT_TRUE(accepts(g, "{\n  \"a\": 1\n}"));
  EXPECT_FALSE(prefix(g, "{\r"));  // \r is not among the whitespace bytes we allow
}

TEST(MatcherTest, ObjectProperties) {
  const auto g = schema(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
    "ok":{"type":"boolean"}},"required":["name","age"],"additionalProperties":false})");
  check(g, {{R"({"name":"x","age":3})", true},
            {R"({"age":3,"name":"x"})", true},
            {R"({"age":3,"name":"x","ok":false})", true},
            {R"({"name":"x"})", false},                 // age missing
            {R"({"name":"x","age":3.5})", false},       // not an integer
            {R"({"name":"x","age":3,"other":1})", false},  // no additional properties
            {R"({"name":"x","name":"y","age":1})", false},  // twice
            {R"({"name":1,"age":3})", false},
            {R"({"age":-0,"name":""})", true}});
  EXPECT_TRUE(prefix(g, R"({"nam)"));
  EXPECT_FALSE(prefix(g, R"({"x)"));
  // After the last property no comma: nothing could follow it.
  EXPECT_FALSE(prefix(g, R"({"name":"x","age":3,"ok":true,)"));
}

TEST(MatcherTest, AdditionalPropertiesSchema) {
  const auto g = schema(R"({"type":"object","properties":{"a":{"type":"null"}},"additionalProperties":{"type":"integer"}})");
  check(g, {{R"({"a":null,"ab":1})", true}, {R"({"ab":1})", true}, {R"({"a":1})", false}, {R"({"b":"x"})", false}});
}

TEST(MatcherTest, ArraysAndBounds) {
  const auto g = schema(R"({"type":"array","items":{"type":"number"},"minItems":1,"maxItems":2})");
  check(g, {{"[1]", true}, {"[1, 2e5]", true}, {"[]", false}, {"[1,2,3]", false}, {"[1.]", false}, {"[-1.5E+3]", true}});
  const auto s = schema(R"({"type":"string","minLength":2,"maxLength":3})");
  check(s, {{"\"ab\"", true}, {"\"a\\nb\"", true}, {"\"a\"", false}, {"\"abcd\"", false}, {"\"\xc3\xa9\xc3\xa9\"", true}});
  // One bound alone, far past it: the counters saturate at the bounds (mask_cache.h), and the
  // answers stay those of counting every character and item.
  check(schema(R"({"type":"string","minLength":3})"),
        {{"\"ab\"", false}, {"\"abc\"", true}, {"\"abcdefghijkl\"", true}, {"\"a\\u00e9\"", false}, {"\"a\\u00e9b\"", true}});
  check(schema(R"({"type":"string","maxLength":2})"), {{"\"\"", true}, {"\"ab\"", true}, {"\"abc\"", false}});
  check(schema(R"({"type":"array","items":{"type":"integer"},"minItems":2})"),
        {{"[1]", false}, {"[1,2]", true}, {"[1,2,3,4,5,6,7]", true}});
  check(schema(R"({"type":"array","items":{"type":"integer"},"maxItems":3})"),
        {{"[]", true}, {"[1,2,3]", true}, {"[1,2,3,4]", false}});
  // A key that leaves the named property's spelling is an additional property from there on.
  check(schema(R"({"type":"object","properties":{"abc":{"type":"integer"}},"additionalProperties":{"type":"string"}})"),
        {{R"({"abc":1})", true}, {R"({"abc":"x"})", false}, {R"({"abd":"x"})", true}, {R"({"abcd":"x"})", true},
         {R"({"ab":"x"})", true}, {R"({"abdefgh":"x","abc":2})", true}});
}

TEST(MatcherTest, EnumConstAnyOfTypes) {
  const auto e = schema(R"({"enum":["red","green",1,10,null,{"k":[1]}]})");
  check(e, {{"\"red\"", true}, {"\"gre\"", false}, {"1", true}, {"10", true}, {"100", false}, {"null", true},
            {"{\"k\":[1]}", true}, {"{\"k\": [1]}", false}});
  const auto c = schema(R"({"const":"x"})");
  check(c, {{"\"x\"", true}, {"\"y\"", false}});
  const auto a = schema(R"({"anyOf":[{"type":"integer"},{"type":"array","items":{"type":"string"}}]})");
  check(a, {{"12", true}, {"[\"a\"]", true}, {"[1]", false}, {"1.5", false}});
  const auto t = schema(R"({"type":["string","null"]})");
  check(t, {{"null", true}, {"\"n\"", true}, {"1", false}});
  const auto o = schema(R"({"oneOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],
    "additionalProperties":false},{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}]})");
  check(o, {{R"({"a":1})", true}, {R"({"a":"s"})", true}, {R"({"a":true})", false}});
}

TEST(MatcherTest, Refs) {
  const auto g = schema(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
    "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},
    "$ref":"#/$defs/node"})");
  check(g, {{R"({"v":1,"next":{"v":2,"next":null}})", true}, {R"({"v":1,"next":{"v":2}})", false}});
  const auto d = schema(R"({"definitions":{"b":{"type":"boolean"}},"type":"array","items":{"$ref":"#/definitions/b"}})");
  check(d, {{"[true,false]", true}, {"[1]", false}});
}

TEST(MatcherTest, NumbersEndWhereTheyMay) {
  const auto g = schema(R"({"type":"number"})");
  Matcher m(g);
  ASSERT_TRUE(m.feed(std::string("12")));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.complete());  // more digits may follow
  const auto b = schema(R"({"type":"boolean"})");
  Matcher t(b);
  ASSERT_TRUE(t.feed(std::string("true")));
  EXPECT_FALSE(t.complete());  // whitespace may follow
  const auto ch = Grammar::choice({"yes", "no", "yes!"});
  Matcher c(ch);
  ASSERT_TRUE(c.feed(std::string("yes")));
  EXPECT_TRUE(c.accepting());
  EXPECT_FALSE(c.complete());
  ASSERT_TRUE(c.feed(std::string("!")));
  EXPECT_TRUE(c.complete());
  EXPECT_FALSE(accepts(ch, " yes"));
  EXPECT_FALSE(accepts(ch, "ye"));
}

TEST(MatcherTest, UnsupportedKeywordsAreErrors) {
  const auto error = [](const char* text) {
    auto g = compile_schema(nlohmann::json::parse(text));
    return g.ok() ? std::string() : g.status().message();
  };
  EXPECT_NE(error(R"({"type":"string","pattern":"a+"})").find("'pattern'"), std::string::npos);
  EXPECT_NE(error(R"({"type":"object","properties":{"a":{"format":"date"}}})").find("at /properties/a"), std::string::npos);
  EXPECT_NE(error(R"({"type":"object","properties":{"a":{"format":"date"}}})").find("'format'"), std::string::npos);
  EXPECT_NE(error(R"({"type":"thing"})").find("'thing'"), std::string::npos);
  EXPECT_NE(error(R"({"$ref":"http://x/y"})").find("$ref"), std::string::npos);
  EXPECT_NE(error(R"({"type":"object","required":["a"],"additionalProperties":false})").find("'a'"), std::string::npos);
  EXPECT_NE(error(R"({"type":"array","items":[{"type":"string"}]})").find("'items'"), std::string::npos);
  EXPECT_NE(error(R"({"type":"array","minItems":3,"maxItems":2})").find("maxItems"), std::string::npos);
  EXPECT_NE(error(R"({"enum":[]})").find("enum"), std::string::npos);
  EXPECT_EQ(error(R"({"title":"T","description":"d","type":"object"})"), "");
}

}  // namespace
}  // namespace sy::structured
